"""The SEND_MESSAGE_V2 request a Producer writes, byte for byte: the producer builds its header
fields as wire text itself (not through RemotingCommand.request's conversion), so these check
that the frame is the one the generic path writes for SendMessageRequestHeaderV2's typed
fields, and that the SendResult is read back from the answer. No network: the connections are
a fake that records requests and answers from a table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pocketmq.client import Producer, message
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import SendStatus
from pocketmq.client.route import MessageQueue, TopicRoute
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, SysFlag
from pocketmq.protocol.properties import decode_properties, encode_properties
from pocketmq.protocol.remoting import RemotingCommand

BROKER = "127.0.0.1:10911"
TOPIC = "SendTopic"


class RecordingRemoting:
    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self.answer_fields: dict[str, Any] = {}

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        cmd.opaque = len(self.requests) + 1  # as the channel numbers them
        self.requests.append(cmd)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=self.answer_fields)

    async def close(self) -> None:
        pass


@pytest.fixture
async def sent() -> AsyncIterator[tuple[Producer, RecordingRemoting]]:
    instance = ClientInstance("127.0.0.1:9876", "10.0.0.1@test")
    remoting = RecordingRemoting()
    instance.remoting = remoting  # type: ignore[assignment]
    instance.broker_addrs["broker-a"] = {0: BROKER}
    producer = Producer("PG", instance=instance, default_topic_queue_nums=8)
    for topic in (TOPIC, "%RETRY%CG"):
        queues = [MessageQueue(topic, "broker-a", i) for i in range(4)]
        producer._publish[topic] = TopicRoute(topic, {"broker-a": {0: BROKER}}, queues, [])
    producer._started = True
    yield producer, remoting
    await instance.close()


def typed_header(cmd: RemotingCommand, props: dict[str, str], **changes: Any) -> dict[str, Any]:
    """SendMessageRequestHeaderV2 as Java types its fields, with this request's time and
    queue (they vary per send)."""
    f = cmd.ext_fields
    header: dict[str, Any] = {
        "a": "PG", "b": f["b"], "c": "TBW102", "d": 8, "e": int(f["e"]), "f": 0,
        "g": int(f["g"]), "h": 0, "i": encode_properties(props), "j": 0, "k": False, "m": False,
    }  # fmt: skip
    header.update(changes)
    return header


def same_frame(cmd: RemotingCommand, header: dict[str, Any]) -> None:
    reference = RemotingCommand.request(cmd.code, header, cmd.body)
    reference.opaque = cmd.opaque
    assert cmd.encode() == reference.encode()


async def test_a_send_writes_the_frame_of_the_typed_header(
    sent: tuple[Producer, RecordingRemoting],
) -> None:
    producer, remoting = sent
    msg = message(TOPIC, b"body", tags="T", keys=["k1", "k2"], properties={"p": "v"}, flag=3)
    await producer.send(msg)
    (cmd,) = remoting.requests
    assert cmd.code == RequestCode.SEND_MESSAGE_V2
    assert list(cmd.ext_fields) == list("abcdefghijkm")
    props = decode_properties(cmd.ext_fields["i"])
    assert props == msg.properties and len(props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]) == 32
    same_frame(cmd, typed_header(cmd, msg.properties, h=3))


async def test_a_retry_send_moves_its_counters_into_the_header(
    sent: tuple[Producer, RecordingRemoting],
) -> None:
    producer, remoting = sent
    msg = message(
        "%RETRY%CG", b"again",
        properties={MessageConst.RECONSUME_TIME: "2", MessageConst.MAX_RECONSUME_TIMES: "5"},
    )  # fmt: skip
    await producer.send(msg)
    (cmd,) = remoting.requests
    rest = {
        k: v
        for k, v in msg.properties.items()
        if k not in (MessageConst.RECONSUME_TIME, MessageConst.MAX_RECONSUME_TIMES)
    }
    # The message keeps its properties; only the request moves them.
    assert MessageConst.RECONSUME_TIME in msg.properties
    assert decode_properties(cmd.ext_fields["i"]) == rest
    assert list(cmd.ext_fields)[-1] == "l"  # after "m", as the typed header adds it
    same_frame(cmd, typed_header(cmd, rest, j=2, l=5))


async def test_a_half_and_a_compressed_body_set_their_sys_flags(
    sent: tuple[Producer, RecordingRemoting],
) -> None:
    producer, remoting = sent
    producer.compress_over_bytes = 16
    msg = message(TOPIC, b"x" * 64, properties={MessageConst.TRANSACTION_PREPARED: "true"})
    await producer.send(msg)
    (cmd,) = remoting.requests
    flags = SysFlag.COMPRESSED | SysFlag.TRANSACTION_PREPARED_TYPE
    assert cmd.body != msg.body
    same_frame(cmd, typed_header(cmd, msg.properties, f=flags))


async def test_the_send_result_is_read_from_the_answer(
    sent: tuple[Producer, RecordingRemoting],
) -> None:
    producer, remoting = sent
    remoting.answer_fields = {"msgId": "7F000001000027DF0000000000001234", "queueOffset": 41}
    first = await producer.send(message(TOPIC, b"a"))
    assert first.status is SendStatus.SEND_OK
    assert first.offset_msg_id == "7F000001000027DF0000000000001234"
    assert first.queue_offset == 41
    assert first.msg_id == decode_properties(remoting.requests[0].ext_fields["i"])["UNIQ_KEY"]
    assert first.message_queue.queue_id == int(remoting.requests[0].ext_fields["e"])
    # A broker that stored it in another queue (an ordered send's fallback) says which.
    remoting.answer_fields = {"msgId": "m", "queueId": 3, "queueOffset": 0}
    second = await producer.send(message(TOPIC, b"b"), queue=MessageQueue(TOPIC, "broker-a", 1))
    assert second.message_queue == MessageQueue(TOPIC, "broker-a", 3)
    remoting.answer_fields = {}
    third = await producer.send(message(TOPIC, b"c"), queue=MessageQueue(TOPIC, "broker-a", 2))
    assert (third.message_queue.queue_id, third.offset_msg_id, third.queue_offset) == (2, "", -1)
