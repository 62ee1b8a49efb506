"""SYNC_FLUSH group commit: every waiting put is acknowledged only once an fdatasync covered its
bytes, late ones get FLUSH_DISK_TIMEOUT, a failed sync fails them and stops the writes. A failed
append stops them too (the fault hook), leaving nothing of itself behind.

The CommitLog flush is wrapped so that a test can hold it (a gate) or make it fail; to show the
pipelining, SlowDisk holds each fdatasync of a CommitLog segment instead."""

from __future__ import annotations

import asyncio
import errno
import os
import queue
import threading
from collections.abc import Callable, Iterator

import pytest
from store_helpers import StoreFactory, msg, put, put_batch, put_ok, read_queue

from pocketmq.errors import StoreWriteError
from pocketmq.pending import Pending
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import mapped_file
from pocketmq.store.commitlog import PWRITE_MIN
from pocketmq.store.config import FlushDiskType
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetStatus, PutResult, PutStatus


class FlushProbe:
    """Replaces store.commitlog.flush: waits for the gate, then syncs (or raises ``error``)."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.original: Callable[[], int] = store.commitlog.flush
        self.gate = threading.Event()
        self.error: OSError | None = None
        self.advanced = 0  # flushes that made new bytes durable
        store.commitlog.flush = self.flush  # type: ignore[method-assign]

    def flush(self) -> int:
        self.gate.wait()
        before = self.store.commitlog.mfq.flushed_where
        # Only a flush with bytes to sync fails: the flush thread also runs idle, and an idle
        # failure before the put's append would refuse the put instead of failing its wait.
        if self.error is not None and self.store.commitlog.max_offset() > before:
            raise self.error
        flushed = self.original()
        if flushed > before:
            self.advanced += 1
        return flushed

    def restore(self) -> None:
        self.gate.set()
        self.store.commitlog.flush = self.original  # type: ignore[method-assign]


@pytest.fixture
def sync_store(
    open_small: StoreFactory,
) -> Iterator[Callable[..., tuple[MessageStore, FlushProbe]]]:
    probes: list[FlushProbe] = []

    def factory(**changes: object) -> tuple[MessageStore, FlushProbe]:
        store = open_small(flush_disk_type=FlushDiskType.SYNC_FLUSH, **changes)
        probe = FlushProbe(store)
        probes.append(probe)
        return store, probe

    yield factory
    for probe in probes:  # before the stores close: close() flushes for real
        probe.restore()


def test_one_flush_acknowledges_every_waiting_put(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]],
) -> None:
    store, probe = sync_store()

    async def main() -> list[tuple[PutResult, int]]:
        async def one(i: int) -> tuple[PutResult, int]:
            result = await store.put_message(msg(body=b"%d" % i))
            return result, store.commitlog.mfq.flushed_where

        tasks = [asyncio.create_task(one(i)) for i in range(20)]
        await asyncio.sleep(0)  # every task appends, then waits for the flush
        probe.gate.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert [r.status for r, _ in results] == [PutStatus.PUT_OK] * 20
    # Acknowledged only once durable, all by the one flush that ran after they appended.
    assert all(r.next_offset <= flushed for r, flushed in results)
    assert probe.advanced == 1


def test_put_not_flushed_in_time_gets_flush_disk_timeout(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]],
) -> None:
    store, probe = sync_store(sync_flush_timeout=1)
    result = put(store, msg())  # the gate stays shut: the disk "hangs"
    assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert store.commitlog.mfq.flushed_where < result.next_offset
    probe.gate.set()
    assert put(store, msg()).status is PutStatus.PUT_OK  # the disk is back


def test_failed_flush_fails_the_waiting_put_and_refuses_writes(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]],
) -> None:
    store, probe = sync_store()
    probe.error = OSError(5, "Input/output error")
    probe.gate.set()
    result = put(store, msg())
    assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert isinstance(store.commitlog.write_error, StoreWriteError)
    assert "Input/output error" in str(store.commitlog.write_error)
    assert put(store, msg()).status is PutStatus.SERVICE_NOT_AVAILABLE


def test_wait_false_put_does_not_wait_for_the_flush(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]],
) -> None:
    store, probe = sync_store()
    result = put(store, msg(properties={MessageConst.WAIT_STORE_MSG_OK: "false"}))
    assert result.status is PutStatus.PUT_OK  # the gate is still shut
    probe.gate.set()
    assert put(store, msg()).status is PutStatus.PUT_OK
    assert store.commitlog.mfq.flushed_where >= result.next_offset


def test_coalesced_puts_wait_for_the_flush_without_a_task_each(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]],
) -> None:
    store, probe = sync_store()

    async def main() -> tuple[int, list[PutResult | Exception]]:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[None] = loop.create_future()
        answers: list[PutResult | Exception] = []

        def answer(outcome: PutResult | Exception) -> None:
            answers.append(outcome)
            if len(answers) == 32:
                answered.set_result(None)

        def read() -> None:  # a read's 32 sends, outside any task as the remoting read makes them
            for i in range(32):
                (put,) = store.put_coalesced([[msg(body=b"%d" % i)]])
                assert isinstance(put, Pending)
                put.then = answer

        loop.call_soon(read)
        for _ in range(3):  # the read, the appends at its iteration's end, one more
            await asyncio.sleep(0)
        waiting = len(asyncio.all_tasks())
        probe.gate.set()
        await answered
        return waiting, answers

    waiting, answers = asyncio.run(main())
    assert waiting == 1  # main's own: no task (nor coroutine) per put waiting for the flush
    assert all(isinstance(a, PutResult) and a.ok for a in answers)
    flushed = store.commitlog.mfq.flushed_where
    assert all(isinstance(a, PutResult) and a.next_offset <= flushed for a in answers)


def test_a_waiter_that_fails_leaves_the_others_answered(
    sync_store: Callable[..., tuple[MessageStore, FlushProbe]], caplog: pytest.LogCaptureFixture
) -> None:
    store, probe = sync_store()
    service = store.flush_service
    assert service is not None

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        end = store.append([msg()]).next_offset

        def fails(ok: bool) -> None:
            raise RuntimeError("a waiter's bug")

        service.when_durable(end, loop, fails)
        after = service.request(end, loop)
        probe.gate.set()
        return await asyncio.wait_for(after, 10)

    assert asyncio.run(main()) is True
    assert "answering a put waiting for a flush failed" in caplog.text


class SlowDisk:
    """Stands in for os.fdatasync: a sync of a CommitLog segment reports where the log ended
    when it began, then waits for ``release`` before syncing for real. Other files pass."""

    def __init__(self, store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.real = os.fdatasync
        self.began: queue.Queue[int] = queue.Queue()  # the log's end at each sync's start
        self.release: queue.Queue[None] = queue.Queue()
        self.syncs = 0
        monkeypatch.setattr(os, "fdatasync", self.fdatasync)

    def fdatasync(self, fd: int) -> None:
        if "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):
            self.syncs += 1
            self.began.put(self.store.max_phy_offset())
            self.release.get(timeout=30)
        self.real(fd)

    async def next_sync(self) -> int:
        return await asyncio.to_thread(self.began.get, True, 30)


def test_puts_arriving_during_a_sync_are_covered_by_exactly_the_next_one(
    open_small: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_small(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    disk = SlowDisk(store, monkeypatch)

    async def main() -> None:
        first = asyncio.create_task(store.put_message(msg(body=b"first")))
        covered_by_first = await disk.next_sync()  # it began once "first" was written

        # While it runs: five puts append and wait, and "late" appends but asks only later.
        during = [asyncio.create_task(store.put_message(msg(body=b"%d" % i))) for i in range(5)]
        await asyncio.sleep(0)  # each task appends, then waits for its flush
        late_msgs = [msg(body=b"late")]
        late_append = store.append(late_msgs)
        assert not first.done()
        disk.release.put(None)

        assert (await first).status is PutStatus.PUT_OK
        covered_by_second = await disk.next_sync()  # began at once: requests were waiting
        assert not any(task.done() for task in during)
        # "late" asks while the second sync runs; that sync covers it, so it needs no third.
        late = asyncio.create_task(store.flushed(late_append, late_msgs))
        await asyncio.sleep(0)
        assert not late.done()
        disk.release.put(None)

        results = await asyncio.gather(*during, late)
        assert [r.status for r in results] == [PutStatus.PUT_OK] * 6
        assert covered_by_first == (await first).next_offset
        assert covered_by_second == late_append.next_offset
        assert all(r.next_offset <= covered_by_second for r in results)
        assert store.commitlog.mfq.flushed_where == covered_by_second

    asyncio.run(main())
    assert disk.syncs == 2  # one per round, none for a put already covered


def _write_position(store: MessageStore) -> tuple[int, int]:
    last = store.commitlog.mfq.last()
    assert last is not None
    return store.max_phy_offset(), last.wrote_position


def _fail_the_size_pwrite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next large put's second pwrite (its first size) fails with EIO, after the records
    went into the file."""
    real = os.pwrite
    calls = 0

    def pwrite(fd: int, data: memoryview, pos: int) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, data, pos)

    monkeypatch.setattr(mapped_file.os, "pwrite", pwrite)


@pytest.mark.parametrize("way", ["copied", "pwritten"])
def test_a_failed_write_sticks_and_leaves_nothing_behind(
    open_small: StoreFactory, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    # A segment that takes a large put.
    sizes = {"mapped_file_size_commit_log": 4 * PWRITE_MIN}
    store = open_small(**sizes)
    first = put_ok(store, msg(body=b"kept"))
    commitlog = store.commitlog
    before = _write_position(store)
    queue_before = store.get_max_offset_in_queue("T", 0)
    if way == "copied":  # a small put, copied into the mapping: the fault hook tears it
        commitlog._fail_next_write = True
        batch = [msg(body=b"torn"), msg(body=b"never")]
    else:  # a large put, written with two pwrites: the second fails
        _fail_the_size_pwrite(monkeypatch)
        batch = [msg(body=b"t" * 1500) for _ in range(PWRITE_MIN // 1500 + 1)]

    failed = put_batch(store, batch)
    assert failed.status is PutStatus.UNKNOWN_ERROR
    error = commitlog.write_error
    assert isinstance(error, StoreWriteError)
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.EIO
    assert f"commitlog write at {first.next_offset} failed" in failed.detail

    for attempt in ([msg(body=b"later")], [msg(), msg()]):
        refused = put_batch(store, attempt)
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert refused.detail == str(error)
    # Later failures do not replace the first.
    assert commitlog.fail_writes(OSError(errno.ENOSPC, "No space"), "flush") is error
    assert commitlog.write_error is error

    # Nothing of the failed put is visible: offsets, queues and reads are as before it.
    assert _write_position(store) == before
    assert store.get_max_offset_in_queue("T", 0) == queue_before
    assert commitlog.read_record(first.next_offset) is None
    assert [decode_message(r).body for r in read_queue(store, "T", 0)] == [b"kept"]
    assert store.get_message("T", 0, 1, 1).status is GetStatus.OFFSET_OVERFLOW_ONE

    # Reopened, the store takes writes again, and the torn bytes never surface.
    monkeypatch.undo()
    store.close()
    again = open_small(**sizes)
    assert again.commitlog.write_error is None
    assert again.max_phy_offset() == first.next_offset
    assert put_ok(again, msg(body=b"after")).phy_offset == first.next_offset
    assert [decode_message(r).body for r in read_queue(again, "T", 0)] == [b"kept", b"after"]
