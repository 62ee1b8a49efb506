"""What a consumer answers to the admin requests brokers pass on, without a network: the
reset offset bodies (Java and C++ forms), ConsumerRunningInfo, and consume-directly verdicts."""

from __future__ import annotations

import pytest

from pocketmq.client import ConsumeContext, ConsumeResult, MessageExt, PushConsumer
from pocketmq.client.admin_requests import reset_offset_table, running_info
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.route import MessageQueue
from pocketmq.errors import RequestError
from pocketmq.protocol import json_body


def test_reset_offset_bodies_of_java_and_cpp_admins() -> None:
    java = json_body.dumps_object_keys({"offsetTable": {
        json_body.message_queue_key("T", "broker-a", 0): 5,
        json_body.message_queue_key("T", "broker-a", 1): 7,
    }})  # fmt: skip
    cpp = json_body.dumps({"offsetTable": [
        {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 5},
        {"topic": "T", "brokerName": "broker-a", "queueId": 1, "offset": 7},
    ]})  # fmt: skip
    want = {MessageQueue("T", "broker-a", 0): 5, MessageQueue("T", "broker-a", 1): 7}
    assert reset_offset_table(java) == want == reset_offset_table(cpp)
    assert reset_offset_table(b"") == {}
    with pytest.raises(RequestError, match="reset offset body"):
        reset_offset_table(b'{"offsetTable": {"not a queue": 1}}')


async def test_running_info_lists_settings_subscriptions_and_held_queues() -> None:
    consumer = PushConsumer("G", "127.0.0.1:9876", orderly=True, consume_concurrency=3)
    consumer.subscribe("T", "A || B")
    mq = MessageQueue("T", "broker-a", 2)
    pq = ProcessQueue(mq, 10)
    pq.put([MessageExt(topic="T", body=b"x", queue_offset=o) for o in (10, 11)])
    consumer.process_queues[mq] = pq
    consumer.offset_store.update(mq, 10, increase_only=False)
    info = json_body.loads(json_body.dumps_object_keys(running_info(consumer, ["ns1:9876"])))
    props = info["properties"]
    assert props["consumerGroup"] == "G" and props["messageModel"] == "CLUSTERING"
    assert props["PROP_CONSUMEORDERLY"] == "true" and props["PROP_THREADPOOL_CORE_SIZE"] == "3"
    assert props["PROP_NAMESERVER_ADDR"] == "ns1:9876"
    assert [(s["topic"], s["subString"]) for s in info["subscriptionSet"]] == [("T", "A || B")]
    queue = info["mqTable"][json_body.message_queue_key("T", "broker-a", 2)]
    assert (queue["commitOffset"], queue["cachedMsgCount"]) == (10, 2)
    assert (queue["cachedMsgMinOffset"], queue["cachedMsgMaxOffset"]) == (10, 11)


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        (ConsumeResult.CONSUME_SUCCESS, "CR_SUCCESS"),
        (ConsumeResult.RECONSUME_LATER, "CR_LATER"),
        (None, "CR_RETURN_NULL"),
        (ValueError("bad order"), "CR_THROW_EXCEPTION"),
    ],
)
async def test_consume_directly_reports_the_listeners_verdict(
    answer: ConsumeResult | Exception | None, result: str
) -> None:
    seen: list[tuple[bytes, MessageQueue]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult | None:
        seen.append((msgs[0].body, ctx.message_queue))
        if isinstance(answer, Exception):
            raise answer
        return answer

    consumer = PushConsumer("G", "127.0.0.1:9876", listener=listener)
    msg = MessageExt(topic="T", body=b"picked", queue_id=3)
    got = await consumer.consume_directly(msg, "broker-a")
    assert seen == [(b"picked", MessageQueue("T", "broker-a", 3))]
    assert (got["consumeResult"], got["order"], got["autoCommit"]) == (result, False, True)
    assert got["remark"] == ("ValueError: bad order" if isinstance(answer, Exception) else None)
