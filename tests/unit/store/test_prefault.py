"""The prefault thread's advice: the CommitLog pages ahead of the appends are faulted in clean,
so that no sync or flush writes their zeros; none while the appends are large puts, written
with pwrite, which needs no page faulted in. Read from the kernel's accounting of the
bytes this process dirtied (``write_bytes`` of /proc/self/io, counted when a page turns dirty,
whenever it is written back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import StoreFactory, msg, put_batch, put_ok

from pocketmq.protocol.message import MessageExt
from pocketmq.store.commitlog import PWRITE_MIN
from pocketmq.store.config import FlushDiskType
from waiting import wait_until_sync

# Within the CommitLog's first reserved chunk (2 MiB), which the prefault thread covers at once.
AHEAD = 960 << 10


def dirtied_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError("no write_bytes in /proc/self/io")


def dirtied_while_prefaulting(open_small: StoreFactory, flush: FlushDiskType) -> int:
    """Bytes the process dirtied while a store opened, took one acknowledged put and its
    prefault thread ran AHEAD bytes ahead (no index: its own prefault dirties pages on
    purpose)."""
    if not Path("/proc/self/io").exists():
        pytest.skip("needs Linux's per-process I/O accounting (/proc/self/io)")
    before = dirtied_bytes()
    store = open_small(
        mapped_file_size_commit_log=8 << 20,
        flush_disk_type=flush,
        flush_interval_commit_log=3_600_000,
        message_index_enable=False,
    )
    put_ok(store, msg(body=b"x" * 100))
    segment = store.commitlog.mfq.last()
    prefault = store.prefault
    assert segment is not None and prefault is not None
    wait_until_sync(
        lambda: not prefault.enabled or segment.prefaulted >= segment.wrote_position + AHEAD,
        10,
        "the prefault thread to run ahead of the appends",
    )
    if not prefault.enabled:
        pytest.skip("the kernel refuses MADV_POPULATE_READ/WRITE (Linux < 5.14)")
    return dirtied_bytes() - before


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_commitlog_pages_are_faulted_in_clean(
    open_small: StoreFactory, flush: FlushDiskType
) -> None:
    # The record's page, a consume-queue page, the checkpoint, whatever else this process
    # writes meanwhile (up to 92 KiB seen in a full run): some pages, not the window.
    assert dirtied_while_prefaulting(open_small, flush) < AHEAD // 3


def large_put() -> list[MessageExt]:
    """A batch the CommitLog writes with pwrite."""
    return [msg(body=b"x" * 1500) for _ in range(PWRITE_MIN // 1500 + 1)]


def test_large_puts_are_written_without_pages_faulted_in_ahead(open_small: StoreFactory) -> None:
    if not Path("/proc/self/io").exists():
        pytest.skip("needs Linux's per-process I/O accounting (/proc/self/io)")
    store = open_small(mapped_file_size_commit_log=8 << 20, message_index_enable=False)
    before = dirtied_bytes()
    for _ in range(8):
        assert put_batch(store, large_put()).ok
    segment = store.commitlog.mfq.last()
    assert segment is not None
    # The thread ran after the last put: it set where the appends wake it next.
    wait_until_sync(
        lambda: segment.wake_at > segment.wrote_position, 10, "the prefault thread's round"
    )
    # What was written and the consume queue's units, no window of zeros (AHEAD or more).
    # Whatever else the process dirtied meanwhile comes on top: 325 KiB once, under ASan.
    assert dirtied_bytes() - before < segment.wrote_position + AHEAD // 2
    assert segment.prefaulted == 0


def test_a_small_put_after_large_ones_wakes_the_thread_for_its_pages(
    open_small: StoreFactory,
) -> None:
    store = open_small(mapped_file_size_commit_log=8 << 20, message_index_enable=False)
    assert store.prefault is not None
    store.prefault.stop()  # its rounds are played by hand below
    mfq = store.commitlog.mfq
    assert put_batch(store, large_put()).ok
    assert not mfq.prefaulting and mfq.warm_ranges(AHEAD) == []
    mfq.reserve_ahead(AHEAD)
    segment = mfq.last()
    assert segment is not None
    # Later large puts wake the thread when the reservation runs low or half a window on
    # (for the index's pages), not at each put.
    assert segment.wrote_position < segment.wake_at <= segment.wrote_position + AHEAD // 2

    put_ok(store, msg(body=b"small"))
    assert mfq.prefaulting
    assert segment.wake_at < segment.wrote_position  # this put woke the thread
    [(mf, start, _)] = mfq.warm_ranges(AHEAD)
    assert mf is segment and start == segment.wrote_position
