"""The prefault thread's advice: under SYNC_FLUSH the CommitLog pages ahead of the appends are
faulted in clean, so that the back-to-back group-commit syncs do not write their zeros; under
ASYNC_FLUSH writable, so that appends take no fault. Read from the kernel's accounting of the
bytes this process dirtied (``write_bytes`` of /proc/self/io, counted when a page turns dirty,
whenever it is written back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import StoreFactory, msg, put_ok

from pocketmq.store.config import FlushDiskType
from waiting import wait_until_sync

# Within the CommitLog's first reserved chunk (1 MiB), which the prefault thread covers at once.
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


def test_sync_flush_commitlog_pages_are_faulted_in_clean(open_small: StoreFactory) -> None:
    # The record's page, a consume-queue page, the checkpoint, whatever else this process
    # writes meanwhile (up to 92 KiB seen in a full run): some pages, not the window.
    assert dirtied_while_prefaulting(open_small, FlushDiskType.SYNC_FLUSH) < AHEAD // 3


def test_async_flush_commitlog_pages_are_faulted_in_writable(open_small: StoreFactory) -> None:
    assert dirtied_while_prefaulting(open_small, FlushDiskType.ASYNC_FLUSH) >= AHEAD
