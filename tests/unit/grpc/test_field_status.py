"""gRPC edge conversions of refused requests: a field refused by protocol.fields reaches a client
as the v2 code of its kind, and an unknown enum number is refused, not an error."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pocketmq.errors import RequestError
from pocketmq.grpc.convert import GrpcRequestError, SendLimits, status_of_error, to_message_ext
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol import fields


@pytest.mark.parametrize(
    ("refuse", "code"),
    [
        (lambda: fields.check_topic("bad topic"), pb.ILLEGAL_TOPIC),
        (lambda: fields.check_group(""), pb.ILLEGAL_CONSUMER_GROUP),
        (lambda: fields.check_offset(-1), pb.ILLEGAL_OFFSET),
        (lambda: fields.check_invisible_ms(1, 10, 100), pb.ILLEGAL_INVISIBLE_TIME),
        (lambda: fields.check_body_size(11, 10), pb.MESSAGE_BODY_TOO_LARGE),
        (lambda: fields.check_body_size(0, 10, allow_empty=False), pb.MESSAGE_BODY_EMPTY),
        (lambda: fields.check_batch_size(0), pb.BAD_REQUEST),
        (lambda: fields.check_queue_id(4, 4), pb.BAD_REQUEST),
        (lambda: fields.check_java_int(2**31, "x"), pb.BAD_REQUEST),
    ],
)
def test_field_errors_become_their_v2_codes(refuse: Callable[[], object], code: int) -> None:
    with pytest.raises(RequestError) as info:
        refuse()
    status = status_of_error(info.value)
    assert status.code == code
    assert status.message == info.value.remark


def test_an_unknown_message_type_is_unsupported_not_an_error() -> None:
    msg = pb.Message(
        topic=pb.Resource(name="T"),
        body=b"x",
        system_properties=pb.SystemProperties(message_id="M", message_type=42),
    )
    with pytest.raises(GrpcRequestError) as info:
        to_message_ext(msg, SendLimits(max_body_size=16), ("127.0.0.1", 1))
    assert info.value.grpc_code == pb.UNSUPPORTED
    assert "message type 42 is not supported" in info.value.remark
