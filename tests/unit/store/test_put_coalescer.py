"""Coalesced puts (MessageStore.put_coalesced): the puts of one event-loop iteration go into the
CommitLog as one put, in the order they were made, each with the result it would have had
alone; the first put of an iteration is appended at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_helpers import StoreFactory, msg, read_queue

from pocketmq.pending import Pending, outcome_of
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store.config import FlushDiskType
from pocketmq.store.message_store import MessageStore
from pocketmq.store.put_coalescer import PutCoalescer
from pocketmq.store.results import PutResult, PutStatus


def count_log_puts(store: MessageStore) -> list[int]:
    """The number of messages of each CommitLog put from now on (``_append_one`` included)."""
    sizes: list[int] = []
    put = store.commitlog.put
    append_one = store._append_one

    def counting(msgs: list[MessageExt]) -> Any:
        sizes.append(len(msgs))
        return put(msgs)

    def counting_one(msg: MessageExt) -> Any:
        done = append_one(msg)
        if done is not None:  # else put() follows, counted there
            sizes.append(1)
        return done

    store.commitlog.put = counting  # type: ignore[method-assign]
    store._append_one = counting_one  # type: ignore[method-assign]
    return sizes


async def put(store: MessageStore, unit: list[MessageExt]) -> PutResult:
    """``put_coalesced``'s result for one unit, now or when given, as a caller in a task
    awaits it."""
    (result,) = store.put_coalesced([unit])
    return await settled(result)


async def settled(result: PutResult | Pending[PutResult] | Exception) -> PutResult:
    if isinstance(result, Exception):
        raise result
    return result if isinstance(result, PutResult) else await outcome_of(result)


async def at_once(store: MessageStore, units: list[list[MessageExt]]) -> list[PutResult]:
    """Every unit put in the same iteration, each by a task of its own."""
    return list(await asyncio.gather(*(put(store, unit) for unit in units)))


def test_the_puts_of_one_iteration_take_one_log_put_in_order(open_small: StoreFactory) -> None:
    store = open_small()
    puts = count_log_puts(store)
    units = [[msg(body=b"a")], [msg(body=b"b", queue_id=1)], [msg(body=b"c")],
             [msg(body=b"d"), msg(body=b"e")], [msg(body=b"f", queue_id=1)]]  # fmt: skip
    results = asyncio.run(at_once(store, units))
    assert puts == [1, 5]  # the first at once, the rest together when the iteration ends
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert [r.queue_offset for r in results] == [0, 0, 1, 2, 1]
    assert [r.msg_num for r in results] == [1, 1, 1, 2, 1]
    offsets = [o for r in results for o in r.phy_offsets]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert sum(r.wrote_bytes for r in results) == store.max_phy_offset()
    for result in results:  # each result's own records, where it says
        assert result.next_offset == result.phy_offsets[-1] + len(
            store.commitlog.read_record(result.phy_offsets[-1]) or b""
        )
    assert [decode_message(raw).body for raw in read_queue(store, "T", 0)] == [
        b"a", b"c", b"d", b"e",
    ]  # fmt: skip
    assert [decode_message(raw).body for raw in read_queue(store, "T", 1)] == [b"b", b"f"]
    assert results[3].msg_ids_text.count(",") == 1


def test_one_callers_sequence_of_puts_is_not_held(open_small: StoreFactory) -> None:
    store = open_small()
    puts = count_log_puts(store)

    async def run() -> list[PutResult]:
        first = [await put(store, [msg(body=bytes([i]))]) for i in range(3)]
        burst = await at_once(store, [[msg()] for _ in range(3)])  # other tasks: held
        return first + burst

    results = asyncio.run(run())
    assert puts == [1, 1, 1, 1, 2]
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4, 5]


def test_a_bad_unit_fails_alone(open_small: StoreFactory) -> None:
    store = open_small()  # max_message_size 2000
    units = [[msg(body=b"first")], [msg(body=b"ok")], [msg(body=b"x" * 2001)],
             [msg(properties={"big": "v" * 32767})], [msg(body=b"ok too")]]  # fmt: skip
    results = asyncio.run(at_once(store, units))
    assert [r.status for r in results] == [
        PutStatus.PUT_OK, PutStatus.PUT_OK, PutStatus.MESSAGE_ILLEGAL,
        PutStatus.PROPERTIES_SIZE_EXCEEDED, PutStatus.PUT_OK,
    ]  # fmt: skip
    assert [decode_message(raw).body for raw in read_queue(store, "T", 0)] == [
        b"first", b"ok", b"ok too",
    ]  # fmt: skip


def test_a_store_that_refuses_answers_every_put(open_small: StoreFactory) -> None:
    store = open_small()
    store.disk_full = True
    results = asyncio.run(at_once(store, [[msg()], [msg()], [msg()]]))
    assert {r.status for r in results} == {PutStatus.SERVICE_NOT_AVAILABLE}
    assert len({id(r) for r in results}) == 3  # SYNC_FLUSH rewrites a result: one each
    assert store.max_phy_offset() == 0


def test_a_cancelled_waiter_leaves_the_others_answered(open_small: StoreFactory) -> None:
    store = open_small()

    async def run() -> list[PutResult]:
        first = asyncio.ensure_future(put(store, [msg(body=b"1")]))
        gone = asyncio.ensure_future(put(store, [msg(body=b"2")]))
        last = asyncio.ensure_future(put(store, [msg(body=b"3")]))
        await asyncio.sleep(0)  # each task has made its put; 2 and 3 wait for the iteration
        gone.cancel()
        return [await first, await last]

    results = asyncio.run(run())
    assert [r.queue_offset for r in results] == [0, 2]
    # The cancelled put is stored (unacknowledged), as after a crash following the append.
    assert len(read_queue(store, "T", 0)) == 3


def test_a_failing_append_fails_that_iteration_only() -> None:
    calls: list[int] = []

    def append_units(units: list[list[MessageExt]]) -> list[PutResult]:
        calls.append(len(units))
        if len(calls) == 2:
            raise OSError("boom")
        return [PutResult(PutStatus.PUT_OK) for _ in units]

    coalescer = PutCoalescer(append_units, lambda result, msgs: result)

    async def put() -> PutResult:
        (result,) = coalescer.append_run([[msg()]])
        return await settled(result)

    async def run() -> list[Any]:
        failed = await asyncio.gather(put(), put(), put(), return_exceptions=True)
        return [*failed, await put()]

    outcome = asyncio.run(run())
    assert outcome[0].status is PutStatus.PUT_OK
    assert [type(e) for e in outcome[1:3]] == [OSError, OSError]
    assert outcome[3].status is PutStatus.PUT_OK  # the next iteration's put
    assert calls == [1, 2, 1]


def test_an_answer_that_fails_leaves_the_others_answered(
    open_small: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_small()
    answered: list[int] = []

    def answer(outcome: PutResult | Exception) -> None:
        assert isinstance(outcome, PutResult)
        if outcome.queue_offset == 1:
            raise RuntimeError("this answer fails")
        answered.append(outcome.queue_offset)

    def made_in_one_callback() -> list[PutResult | Pending[PutResult]]:
        """As a read's sends are: the first at once, the others held."""
        results = [store.put_coalesced([[msg()]])[0] for _ in range(4)]
        assert not any(isinstance(result, Exception) for result in results)
        for result in results[1:]:
            assert isinstance(result, Pending)
            result.then = answer
        return results

    async def run() -> list[PutResult | Pending[PutResult]]:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[list[PutResult | Pending[PutResult]]] = loop.create_future()
        loop.call_soon(lambda: made.set_result(made_in_one_callback()))
        results = await made
        await asyncio.sleep(0)
        return results

    first = asyncio.run(run())[0]
    assert isinstance(first, PutResult) and first.queue_offset == 0
    assert answered == [2, 3]
    assert "answering a put failed" in caplog.text


def test_coalesced_puts_are_durable_when_answered(open_small: StoreFactory) -> None:
    store = open_small(flush_disk_type=FlushDiskType.SYNC_FLUSH)

    async def run() -> list[int]:
        durable: list[int] = []

        async def put_one(i: int) -> None:
            result = await put(store, [msg(body=str(i).encode())])
            assert result.ok
            durable.append(store.commitlog.mfq.flushed_where - result.next_offset)

        await asyncio.gather(*(put_one(i) for i in range(20)))
        return durable

    assert min(asyncio.run(run())) >= 0
