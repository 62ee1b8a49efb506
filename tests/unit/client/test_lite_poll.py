"""LitePullConsumer.poll's hand-off from the pull tasks: a batch waiting is taken at once, a
waiting poll wakes when a batch is pulled, concurrent polls each take their own batch, batches
of a released queue are skipped, and a poll that gives up leaves nothing behind. No broker: the
pull side is played by calling on_pulled."""

from __future__ import annotations

import asyncio

from pocketmq.client.lite_pull import LitePullConsumer
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.route import MessageQueue
from pocketmq.protocol.message import MessageExt

MQ = MessageQueue("T", "b", 0)


def consumer_holding(mq: MessageQueue = MQ) -> tuple[LitePullConsumer, ProcessQueue]:
    consumer = LitePullConsumer("G", "127.0.0.1:1")
    pq = ProcessQueue(mq, 0)
    consumer.process_queues[mq] = pq
    return consumer, pq


def pulled(pq: ProcessQueue, *offsets: int) -> list[MessageExt]:
    """Messages at these offsets, held by pq as a pull task leaves them."""
    msgs = [MessageExt(topic=pq.mq.topic, body=b"x", queue_offset=o) for o in offsets]
    pq.put(msgs)
    return msgs


async def test_a_waiting_batch_is_taken_and_its_offset_committed() -> None:
    consumer, pq = consumer_holding()
    first, second = pulled(pq, 0, 1), pulled(pq, 2)
    consumer.on_pulled(pq, first)
    consumer.on_pulled(pq, second)
    assert await consumer.poll(5.0) is first
    assert consumer.offset_store.offsets[MQ] == 2  # the lowest offset still held
    assert await consumer.poll(5.0) is second
    assert consumer.offset_store.offsets[MQ] == 3


async def test_a_waiting_poll_wakes_when_a_batch_is_pulled() -> None:
    consumer, pq = consumer_holding()
    poll = asyncio.ensure_future(consumer.poll(60.0))
    await asyncio.sleep(0)  # the poll parks: the buffer is empty
    assert not poll.done()
    msgs = pulled(pq, 0)
    consumer.on_pulled(pq, msgs)
    assert await poll is msgs
    assert consumer._waiters == []


async def test_concurrent_polls_each_take_one_batch() -> None:
    consumer, pq = consumer_holding()
    polls = [asyncio.ensure_future(consumer.poll(60.0)) for _ in range(2)]
    await asyncio.sleep(0)
    batches = [pulled(pq, 0), pulled(pq, 1)]
    for batch in batches:
        consumer.on_pulled(pq, batch)
    got = await asyncio.gather(*polls)
    assert sorted(got, key=id) == sorted(batches, key=id)


async def test_a_batch_of_a_released_queue_is_skipped() -> None:
    consumer, pq = consumer_holding()
    other_mq = MessageQueue("T", "b", 1)
    other = ProcessQueue(other_mq, 0)
    consumer.process_queues[other_mq] = other
    stale, kept = pulled(pq, 0), pulled(other, 0)
    consumer.on_pulled(pq, stale)
    consumer.on_pulled(other, kept)
    pq.drop()
    del consumer.process_queues[MQ]
    assert await consumer.poll(5.0) is kept


async def test_nothing_pulled_gives_an_empty_batch_and_no_waiter_is_left() -> None:
    consumer, pq = consumer_holding()
    assert await consumer.poll(0) == []
    poll = asyncio.ensure_future(consumer.poll(60.0))
    await asyncio.sleep(0)
    assert len(consumer._waiters) == 1
    poll.cancel()
    await asyncio.gather(poll, return_exceptions=True)
    assert consumer._waiters == []
    msgs = pulled(pq, 0)
    consumer.on_pulled(pq, msgs)  # nobody waits: the batch stays for the next poll
    assert await consumer.poll(5.0) is msgs
