"""Which part of a mapping is advised MADV_RANDOM: a new file whole, a reopened log from where
recovery resumes it, a reopened index file whole, so that a fault reads nothing around its page
(mapped_file.py's docstring). Read from the kernel's own record of the advice: the ``rr`` flag
in /proc/self/smaps of the mapping's VMAs."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest
from store_helpers import StoreFactory, mapping_vmas, msg, put_ok

from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.reserve import COMMITLOG_RESERVE
from waiting import wait_until_sync

SIZE = 4 << 20
PAGE = mmap.PAGESIZE


def random_ranges(mf: MappedFile) -> list[tuple[int, int]]:
    """The [start, end) file positions of mf's mapping whose VMAs carry the random advice."""
    out = [(lo, hi) for lo, hi, flags in mapping_vmas(mf) if "rr" in flags]
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(out):
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def test_a_new_file_is_advised_random_whole(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / "f", 0, SIZE, COMMITLOG_RESERVE)
    try:
        assert random_ranges(mf) == [(0, SIZE)]
    finally:
        mf.close()


def test_a_reopened_file_is_advised_from_where_it_is_written(tmp_path: Path) -> None:
    MappedFile.create(tmp_path / "f", 0, SIZE, COMMITLOG_RESERVE).close()
    mf = MappedFile.open(tmp_path / "f", 0, SIZE, COMMITLOG_RESERVE)
    try:
        assert random_ranges(mf) == []  # cold reads of what it holds keep their read-ahead
        mf.expect_writes(5 * PAGE + 100)
        assert random_ranges(mf) == [(5 * PAGE, SIZE)]
        mf.expect_writes(9 * PAGE)  # already covered
        assert random_ranges(mf) == [(5 * PAGE, SIZE)]
        mf.expect_writes(2 * PAGE)  # earlier: the advice grows down
        assert random_ranges(mf) == [(2 * PAGE, SIZE)]
    finally:
        mf.close()
    mf.expect_writes(0)  # closed meanwhile (a file deleted by retention): nothing to advise


def test_a_reopened_segment_being_prefaulted_is_advised_from_its_write_position(
    open_small: StoreFactory,
) -> None:
    store = open_small(mapped_file_size_commit_log=SIZE, message_index_enable=False)
    for _ in range(20):
        put_ok(store, msg(body=b"x" * 1000))
    store.close()
    store = open_small(mapped_file_size_commit_log=SIZE, message_index_enable=False)
    segment = store.commitlog.mfq.last()
    prefault = store.prefault
    assert segment is not None and prefault is not None
    put_ok(store, msg(body=b"y" * 100))
    wait_until_sync(
        lambda: not prefault.enabled or segment.prefaulted > segment.wrote_position,
        10,
        "the prefault thread to fault in the reopened segment",
    )
    if not prefault.enabled:
        pytest.skip("the kernel refuses MADV_POPULATE_WRITE (Linux < 5.14)")
    ranges = random_ranges(segment)
    assert len(ranges) == 1 and ranges[0][1] == SIZE
    assert 0 < ranges[0][0] <= segment.wrote_position - 1100  # the records before stay normal


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
def test_recovery_advises_each_log_from_where_it_resumes(
    open_small: StoreFactory, store_root: Path, abort: bool
) -> None:
    store = open_small(mapped_file_size_commit_log=SIZE, message_index_enable=False)
    for _ in range(303):  # the last consume-queue file (10 units) and segment partly written
        put_ok(store, msg(body=b"x" * 1000))
    store.close()
    if abort:
        (store_root / "abort").touch()
    store = open_small(mapped_file_size_commit_log=SIZE, message_index_enable=False)
    assert store.last_exit_ok is not abort
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    for mf in (cq.mfq.last(), store.commitlog.mfq.last()):
        assert mf is not None and 0 < mf.wrote_position < mf.file_size
        assert random_ranges(mf) == [(mf.wrote_position - mf.wrote_position % PAGE, mf.file_size)]


def test_a_reopened_index_file_is_advised_random_whole(open_small: StoreFactory) -> None:
    store = open_small(mapped_file_size_commit_log=SIZE)
    put_ok(store, msg(keys="k1"))
    store.close()
    store = open_small(mapped_file_size_commit_log=SIZE)
    (index,) = store.index.files
    assert random_ranges(index.mf) == [(0, index.mf.file_size)]
