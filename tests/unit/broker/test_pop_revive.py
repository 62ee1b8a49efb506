"""POP deadlines on a fake clock: revive exactly at the deadline, into the retry topic with
one more attempt, into the DLQ once the group's deliveries are spent, changed deadlines,
FIFO queues blocked until theirs, acks refused after it, and a failed revive tried again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pop_harness import GROUP, TOPIC, Broker, bodies, running

from pocketmq.broker.pop import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.revive import RETRY_AFTER_FAILURE_MS
from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.names import dlq_topic, pop_retry_topic
from pocketmq.store import PutResult, PutStatus

RETRY = pop_retry_topic(GROUP, TOPIC)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running(Broker(tmp_path, clock=FakeClock())) as b:
        yield b


def deadline(handle: str) -> int:
    return ReceiptHandle.decode(handle).deadline


async def test_revived_at_the_deadline_not_a_millisecond_before(broker: Broker) -> None:
    await broker.send("m")
    (p,) = await broker.receive(invisible_ms=1000)
    assert await broker.advance_to(deadline(p.handle) - 1) == 1
    assert broker.stored(RETRY) == []
    assert await broker.receive() == []
    assert await broker.advance(1) is None  # nothing left in flight
    assert [m.body for m in broker.stored(RETRY)] == [b"m"]


async def test_each_revive_puts_one_more_attempt_in_the_retry_topic(broker: Broker) -> None:
    await broker.send("m")
    (first,) = await broker.receive()
    await broker.advance_to(deadline(first.handle))
    (second,) = await broker.receive()
    assert second.attempt == 2 and second.msg.topic == RETRY and second.topic == TOPIC
    await broker.advance_to(deadline(second.handle))
    copies = broker.stored(RETRY)
    assert [m.reconsume_times for m in copies] == [1, 2]
    for copy in copies:
        assert copy.body == b"m"
        assert copy.properties[MessageConst.RETRY_TOPIC] == TOPIC
        assert copy.properties[MessageConst.ORIGIN_MESSAGE_ID] == "m"
    (third,) = await broker.receive()
    assert third.attempt == 3


async def test_dead_lettered_at_the_deadline_of_the_last_delivery(tmp_path: Path) -> None:
    async with running(Broker(tmp_path, max_attempts=2, clock=FakeClock())) as b:
        await b.send("poison")
        (first,) = await b.receive()
        await b.advance_to(deadline(first.handle))
        (last,) = await b.receive()
        assert last.attempt == 2
        await b.advance_to(deadline(last.handle) - 1)
        assert b.dlq() == []
        await b.advance(1)
        (dead,) = b.dlq()
        assert dead.topic == dlq_topic(GROUP) and dead.body == b"poison"
        assert dead.reconsume_times == 1  # as the retry copy it was made from
        assert len(b.stored(RETRY)) == 1  # not revived once more
        assert await b.receive() == []
        with pytest.raises(InvalidReceiptHandle, match="stale"):
            await b.pop.ack(GROUP, TOPIC, last.handle)


async def test_a_message_past_the_groups_deliveries_is_dead_lettered_when_popped(
    broker: Broker,
) -> None:
    await broker.send("m")
    for _ in range(2):
        (p,) = await broker.receive()
        await broker.advance_to(deadline(p.handle))
    broker.max_attempts = 2  # the group's retry count was lowered since the last revive
    assert await broker.receive() == []
    (dead,) = broker.dlq()
    assert dead.reconsume_times == 2


async def test_change_invisible_moves_the_deadline_and_stales_the_old_handle(
    broker: Broker,
) -> None:
    await broker.send("m")
    (p,) = await broker.receive(invisible_ms=1000)
    await broker.advance(500)
    new = await broker.pop.change_invisible(GROUP, TOPIC, p.handle, 1000)
    assert deadline(new) == deadline(p.handle) + 500
    with pytest.raises(InvalidReceiptHandle, match="stale"):
        await broker.pop.ack(GROUP, TOPIC, p.handle)
    assert await broker.advance_to(deadline(p.handle)) == 500
    assert broker.stored(RETRY) == []
    await broker.advance_to(deadline(new) - 1)
    assert broker.stored(RETRY) == []
    await broker.advance(1)
    assert len(broker.stored(RETRY)) == 1
    with pytest.raises(InvalidReceiptHandle, match="stale"):
        await broker.pop.ack(GROUP, TOPIC, new)


async def test_fifo_queue_blocked_until_the_deadline_then_redelivered_first(
    broker: Broker,
) -> None:
    await broker.send("m0")
    (p,) = await broker.receive(n=1, fifo=True)
    await broker.send("m1")
    assert await broker.receive(fifo=True) == []
    await broker.advance_to(deadline(p.handle) - 1)
    assert await broker.receive(fifo=True) == []
    await broker.advance(1)
    again = await broker.receive(fifo=True)
    assert bodies(again) == ["m0", "m1"]
    assert [a.attempt for a in again] == [2, 1]
    assert broker.stored(RETRY) == []  # FIFO redelivers from the queue itself


async def test_ack_is_refused_once_the_deadline_is_reached(broker: Broker) -> None:
    await broker.send("in time")
    await broker.send("late")
    got = {p.msg.body.decode(): p for p in await broker.receive(invisible_ms=1000)}
    clock = broker.clock
    assert clock is not None
    clock.advance(deadline(got["in time"].handle) - 1 - clock.now_ms())
    await broker.pop.ack(GROUP, TOPIC, got["in time"].handle)
    clock.advance(1)  # due, and not revived yet
    with pytest.raises(InvalidReceiptHandle, match="expired"):
        await broker.pop.ack(GROUP, TOPIC, got["late"].handle)
    await broker.pop.revive_due()
    assert [m.body for m in broker.stored(RETRY)] == [b"late"]


async def test_a_failed_revive_is_tried_again_later(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reviver = broker.pop.reviver
    redeliver = reviver.redeliver

    async def failing(*args: object, **kwargs: object) -> PutResult:
        monkeypatch.setattr(reviver, "redeliver", redeliver)
        return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, detail="disk full")

    monkeypatch.setattr(reviver, "redeliver", failing)
    await broker.send("m")
    (p,) = await broker.receive()
    assert await broker.advance_to(deadline(p.handle)) == RETRY_AFTER_FAILURE_MS
    assert broker.stored(RETRY) == []
    assert await broker.advance(RETRY_AFTER_FAILURE_MS - 1) == 1
    assert await broker.advance(1) is None
    assert len(broker.stored(RETRY)) == 1
