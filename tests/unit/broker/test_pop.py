"""The POP service on a real store: pop, ack, invisible-time expiry and revive, change of
invisible time with stale handles, DLQ after the group's deliveries, FIFO queues, and the
in-flight state replayed from the revive log after a restart. Time is a fake clock the tests
move themselves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pop_harness import GROUP, TOPIC, Broker, bodies, running

from pocketmq.broker.pop import InvalidReceiptHandle, ReceiptHandle
from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.names import pop_retry_topic


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running(Broker(tmp_path, clock=FakeClock())) as b:
        yield b


async def test_new_group_starts_at_the_beginning_of_a_young_queue(broker: Broker) -> None:
    await broker.send("m0")
    await broker.send("m1", queue_id=1)
    got = await broker.receive()
    assert sorted(bodies(got)) == ["m0", "m1"]
    assert {p.attempt for p in got} == {1}
    assert await broker.receive() == []  # invisible now, and the offsets moved on


async def test_ack_ends_it_and_unacked_comes_back_from_the_retry_topic(broker: Broker) -> None:
    await broker.send("acked")
    await broker.send("dropped")
    first = {p.msg.body.decode(): p for p in await broker.receive()}
    await broker.pop.ack(GROUP, TOPIC, first["acked"].handle)
    with pytest.raises(InvalidReceiptHandle, match="stale"):
        await broker.pop.ack(GROUP, TOPIC, first["acked"].handle)
    await broker.advance(300)
    again = await broker.receive()
    assert bodies(again) == ["dropped"]
    assert again[0].attempt == 2 and again[0].topic == TOPIC
    assert again[0].msg.topic == pop_retry_topic(GROUP, TOPIC)
    assert ReceiptHandle.decode(again[0].handle).retry
    assert again[0].msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "dropped"
    # An expired handle is refused: the message went on without it.
    with pytest.raises(InvalidReceiptHandle):
        await broker.pop.ack(GROUP, TOPIC, first["dropped"].handle)
    await broker.pop.ack(GROUP, TOPIC, again[0].handle)


async def test_change_invisible_time_replaces_the_handle(broker: Broker) -> None:
    await broker.send("slow")
    (p,) = await broker.receive(invisible_ms=300)
    new = await broker.pop.change_invisible(GROUP, TOPIC, p.handle, 1500)
    with pytest.raises(InvalidReceiptHandle, match="stale"):
        await broker.pop.ack(GROUP, TOPIC, p.handle)
    await broker.advance(300)
    assert await broker.receive() == []  # not at the first deadline
    await broker.advance_to(ReceiptHandle.decode(new).deadline)
    again = await broker.receive()
    assert again[0].attempt == 2
    with pytest.raises(InvalidReceiptHandle):
        await broker.pop.ack(GROUP, TOPIC, new)  # expired by now


async def test_dead_lettered_after_the_groups_deliveries(broker: Broker) -> None:
    await broker.send("poison")
    attempts = [p.attempt for p in await broker.receive()]
    for _ in range(2):
        await broker.advance(300)
        attempts += [p.attempt for p in await broker.receive()]
    assert attempts == [1, 2, 3]
    await broker.advance(300)
    assert broker.dlq()
    assert await broker.receive() == []


async def test_fifo_queue_is_blocked_until_acked_and_redelivers_in_order(broker: Broker) -> None:
    for i in range(3):
        await broker.send(f"q0-{i}", queue_id=0)
    await broker.send("q1-0", queue_id=1)
    got = {p.msg.body.decode(): p for p in await broker.receive(fifo=True)}
    assert [b for b in got if b.startswith("q0")] == ["q0-0", "q0-1", "q0-2"]
    assert "q1-0" in got
    assert await broker.receive(fifo=True) == []  # both queues blocked
    await broker.pop.ack(GROUP, TOPIC, got["q0-0"].handle)
    await broker.pop.ack(GROUP, TOPIC, got["q1-0"].handle)
    # q0-1 and q0-2 were not acked: at their deadline they come back, in order, nothing else.
    await broker.advance(300)
    again = await broker.receive(fifo=True)
    assert bodies(again) == ["q0-1", "q0-2"]
    assert [p.attempt for p in again] == [2, 2]
    for p in again:
        await broker.pop.ack(GROUP, TOPIC, p.handle)
    await broker.send("q0-3", queue_id=0)
    assert bodies(await broker.receive(fifo=True)) == ["q0-3"]


async def test_in_flight_state_survives_a_restart(tmp_path: Path) -> None:
    async with running(Broker(tmp_path, clock=FakeClock())) as b:
        await b.send("a")
        await b.send("b")
        got = {p.msg.body.decode(): p for p in await b.receive(invisible_ms=1500)}
        await b.pop.ack(GROUP, TOPIC, got["a"].handle)
        await b.restart(clean=False)  # offsets not persisted, as after a crash
        # "b" is still invisible, "a" stays acked, and neither is popped from the queue again.
        assert await b.receive() == []
        await b.advance(1499)
        assert await b.receive() == []
        await b.advance(1)
        again = await b.receive()
        assert bodies(again) == ["b"] and again[0].attempt == 2


async def test_fifo_attempts_survive_a_restart(tmp_path: Path) -> None:
    async with running(Broker(tmp_path, clock=FakeClock())) as b:
        await b.send("f0")
        await b.send("f1")
        first = await b.receive(fifo=True, invisible_ms=300)
        assert bodies(first) == ["f0", "f1"]
        await b.pop.ack(GROUP, TOPIC, first[1].handle)
        await b.restart(clean=False)
        await b.advance(300)
        again = await b.receive(fifo=True)
        assert bodies(again) == ["f0"] and again[0].attempt == 2  # f1 stays acked


async def test_tag_filter_and_malformed_handles(broker: Broker) -> None:
    await broker.send("x", tags="A")
    await broker.send("y", tags="B")
    got = await broker.receive(tags="B")
    assert bodies(got) == ["y"]
    for bad in ("", "1 2 3", "a b c d 0 broker-a 0 0", "1 2 3 0 9 broker-a 0 0"):
        with pytest.raises(InvalidReceiptHandle, match="malformed"):
            await broker.pop.ack(GROUP, TOPIC, bad)


async def test_a_parked_pop_woken_by_an_arrival_is_counted(broker: Broker) -> None:
    # Senders compare the count around their put to let the woken pops answer first.
    parked = asyncio.create_task(broker.receive(poll_ms=30_000))
    await asyncio.sleep(0)  # let it park
    assert broker.pop.woken == 0
    await broker.send("arrived")
    assert broker.pop.woken == 1
    assert bodies(await asyncio.wait_for(parked, 5)) == ["arrived"]  # a guard against a hang
    await broker.send("nobody-waits")
    assert broker.pop.woken == 1
