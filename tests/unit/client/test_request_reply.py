"""Request-reply on the client without a network: a request's properties, the reply built
from it, and a pushed reply resolving the request waiting for it."""

from __future__ import annotations

import zlib

import pytest

from pocketmq.client.request_reply import (
    ReplyWaiters,
    is_reply,
    prepare_request,
    reply_message,
)
from pocketmq.clock import FakeClock
from pocketmq.errors import ClientError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import Message, MessageConst, MessageExt, SysFlag
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel


def _stored_request() -> MessageExt:
    msg = Message("Orders", b"how much?", 0, {"k": "v"})
    prepare_request(msg, "10.0.0.1@requester", 3000)
    props = {**msg.properties, MessageConst.CLUSTER: "C1"}
    return MessageExt(topic=msg.topic, body=msg.body, properties=props)


def test_a_reply_goes_to_the_clusters_reply_topic_with_the_requests_ids() -> None:
    request = _stored_request()
    assert request.properties[MessageConst.MESSAGE_TTL] == "3000"
    reply = reply_message(request, "42", {"unit": "EUR"})
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"42" and is_reply(reply)
    for name in (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT,
                 MessageConst.MESSAGE_TTL):  # fmt: skip
        assert reply.properties[name] == request.properties[name]
    assert reply.properties["unit"] == "EUR" and "k" not in reply.properties
    assert not is_reply(Message("Orders", b"x"))
    with pytest.raises(ClientError, match=r"property\[CLUSTER\] is null"):
        reply_message(MessageExt(topic="Orders", body=b"x"), b"y")


def _push(props: dict[str, str], body: bytes, sys_flag: int = 0) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
        {"topic": "C1_REPLY_TOPIC", "queueId": 0, "sysFlag": sys_flag, "flag": 0,
         "bornTimestamp": 1, "storeTimestamp": 2, "properties": encode_properties(props),
         "bornHost": "10.0.0.2:5000", "storeHost": "10.0.0.3:10911", "reconsumeTimes": 0},
        body,
    )  # fmt: skip


async def test_a_pushed_reply_resolves_its_request_once() -> None:
    waiters = ReplyWaiters(FakeClock(1_000))
    request = _stored_request()
    correlation_id = request.properties[MessageConst.CORRELATION_ID]
    waiting = waiters.expect(correlation_id)
    reply = reply_message(request, b"")
    body = zlib.compress(b"forty-two" * 100)
    answer = waiters.on_push_reply(
        RemotingChannel(), _push(reply.properties, body, SysFlag.COMPRESSED)
    )
    assert answer.code == ResponseCode.SUCCESS
    got = waiting.result()
    assert got.body == b"forty-two" * 100
    assert got.born_host == ("10.0.0.2", 5000) and got.store_host == ("10.0.0.3", 10911)
    assert got.properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] == "1000"
    # The same reply again (or one whose request timed out) is answered, and dropped.
    again = waiters.on_push_reply(RemotingChannel(), _push(reply.properties, b"late"))
    assert again.code == ResponseCode.SUCCESS


async def test_a_reply_that_does_not_decode_is_refused() -> None:
    waiters = ReplyWaiters(FakeClock())
    answer = waiters.on_push_reply(RemotingChannel(), _push({}, b"not zlib", SysFlag.COMPRESSED))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "process reply message fail")
