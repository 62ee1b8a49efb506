"""5.x transactions at the gRPC edge, without a server: a TRANSACTION message becomes a half
message, the transaction id finds its half's CommitLog offset, EndTransaction's enums map to
RocketMQ's, and a topic's message.type decides what its route accepts."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration

from pocketmq.broker.topics import TopicConfig
from pocketmq.grpc import convert
from pocketmq.grpc.convert import GrpcRequestError, SendLimits, to_message_ext
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.message import MessageConst, SysFlag, create_offset_msg_id

LIMITS = SendLimits(max_body_size=1024)
HOST = ("10.0.0.7", 50000)


def message(
    kind: pb.MessageType = pb.TRANSACTION, namespace: str = "", **system: object
) -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name="TxTopic", resource_namespace=namespace),
        body=b"x",
        system_properties=pb.SystemProperties(message_id="M1", message_type=kind, **system),
    )


def test_a_transaction_message_becomes_a_half() -> None:
    half = to_message_ext(message(), LIMITS, HOST)
    assert SysFlag.transaction_value(half.sys_flag) == SysFlag.TRANSACTION_PREPARED_TYPE
    assert half.properties[MessageConst.TRANSACTION_PREPARED] == "true"
    assert half.properties[MessageConst.PRODUCER_GROUP] == "TxTopic"
    assert MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS not in half.properties


def test_the_producer_group_is_the_topic_with_its_namespace() -> None:
    half = to_message_ext(message(namespace="ns"), LIMITS, HOST)
    assert half.topic == half.properties[MessageConst.PRODUCER_GROUP] == "ns%TxTopic"
    normal = to_message_ext(message(pb.NORMAL), LIMITS, HOST)
    assert normal.sys_flag == 0 and MessageConst.TRANSACTION_PREPARED not in normal.properties
    assert normal.properties[MessageConst.PRODUCER_GROUP] == "TxTopic"


def test_the_recovery_duration_is_the_check_immunity() -> None:
    half = to_message_ext(
        message(orphaned_transaction_recovery_duration=Duration(seconds=90)), LIMITS, HOST
    )
    assert half.properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] == "90"
    for seconds in (-1, convert.MAX_TRANSACTION_RECOVERY_S + 1):
        with pytest.raises(GrpcRequestError) as info:
            to_message_ext(
                message(orphaned_transaction_recovery_duration=Duration(seconds=seconds)),
                LIMITS, HOST,
            )  # fmt: skip
        assert info.value.grpc_code == pb.BAD_REQUEST


@pytest.mark.parametrize("extra", [{"message_group": "g"}, {"delivery_timestamp": {"seconds": 9}}])
def test_a_transaction_message_has_no_group_or_delivery_time(extra: dict[str, object]) -> None:
    with pytest.raises(GrpcRequestError) as info:
        to_message_ext(message(**extra), LIMITS, HOST)
    assert info.value.grpc_code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_a_transaction_id_holds_its_half_offset() -> None:
    for host in (HOST, ("::1", 10911)):
        assert convert.half_offset(create_offset_msg_id(host, 123_456)) == 123_456
    for bad in ("", "  ", "M1", "XYZ", "00" * 15, create_offset_msg_id(HOST, -5)):
        with pytest.raises(GrpcRequestError) as info:
            convert.half_offset(bad)
        assert info.value.grpc_code == pb.INVALID_TRANSACTION_ID


def test_resolutions_and_sources() -> None:
    assert convert.resolution(pb.COMMIT) == SysFlag.TRANSACTION_COMMIT_TYPE
    assert convert.resolution(pb.ROLLBACK) == SysFlag.TRANSACTION_ROLLBACK_TYPE
    # The proxy's UNKNOWN: no decision, the half waits for its check-back.
    assert convert.resolution(pb.TRANSACTION_RESOLUTION_UNSPECIFIED) == SysFlag.TRANSACTION_NOT_TYPE
    assert convert.from_check(pb.SOURCE_SERVER_CHECK)
    assert not convert.from_check(pb.SOURCE_CLIENT)
    assert not convert.from_check(pb.SOURCE_UNSPECIFIED)
    for refuse in (lambda: convert.resolution(7), lambda: convert.from_check(9)):
        with pytest.raises(GrpcRequestError) as info:
            refuse()
        assert info.value.grpc_code == pb.BAD_REQUEST
    with pytest.raises(GrpcRequestError) as bad_id:
        convert.check_message_id("")
    assert bad_id.value.grpc_code == pb.ILLEGAL_MESSAGE_ID


@pytest.mark.parametrize(
    ("attributes", "accepted"),
    [
        ({}, [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]),
        ({"message.type": "MIXED"}, [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]),
        ({"message.type": "TRANSACTION"}, [pb.TRANSACTION]),
        ({"message.type": "FIFO"}, [pb.FIFO]),
        ({"message.type": "UNSPECIFIED"}, [pb.MESSAGE_TYPE_UNSPECIFIED]),
    ],
)
def test_the_route_lists_what_the_topic_accepts(
    attributes: dict[str, str], accepted: list[int]
) -> None:
    cfg = TopicConfig("TxTopic", 2, 2, attributes=attributes)
    queues = convert.message_queues(cfg, pb.Broker(name="b"), pb.Resource(name="TxTopic"))
    assert [list(q.accept_message_types) for q in queues] == [accepted, accepted]
