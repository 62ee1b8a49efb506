"""Chunked reservation: the chunk arithmetic, the mark every writer checks, and the disk a
fresh store really uses (sparse files at their full logical size)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from store_helpers import StoreFactory, msg, open_store, put_ok, read_queue

from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.index_file import IndexFile
from pocketmq.store.layout import CQ_UNIT_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.reserve import (
    COMMITLOG_RESERVE,
    CONSUME_QUEUE_RESERVE,
    FAST_S,
    INDEX_ENTRIES_RESERVE,
    RESERVE_ALIGN,
    SLOT_TABLE_WHOLE_AFTER,
    SLOW_S,
    ReservePolicy,
)

MIB = 1 << 20
CQ_UNIT = struct.Struct(">qiq")  # commitlog offset, size, tags code


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_first_chunk_is_the_minimum() -> None:
    policy = ReservePolicy(RESERVE_ALIGN, 8 * RESERVE_ALIGN)
    assert policy.next_chunk(0, 0.0) == RESERVE_ALIGN


def test_chunk_doubles_while_used_up_fast_and_stops_at_the_cap() -> None:
    policy = ReservePolicy(RESERVE_ALIGN, 8 * RESERVE_ALIGN)
    chunks = [RESERVE_ALIGN]
    for _ in range(5):
        chunks.append(policy.next_chunk(chunks[-1], FAST_S / 2))
    assert chunks == [RESERVE_ALIGN * n for n in (1, 2, 4, 8, 8, 8)]


def test_chunk_holds_at_a_moderate_rate_and_halves_when_slow() -> None:
    policy = ReservePolicy(RESERVE_ALIGN, 8 * RESERVE_ALIGN)
    assert policy.next_chunk(4 * RESERVE_ALIGN, (FAST_S + SLOW_S) / 2) == 4 * RESERVE_ALIGN
    assert policy.next_chunk(4 * RESERVE_ALIGN, SLOW_S * 2) == 2 * RESERVE_ALIGN
    assert policy.next_chunk(RESERVE_ALIGN, SLOW_S * 2) == RESERVE_ALIGN


def test_reserve_end_covers_the_need_a_chunk_ahead_page_aligned_within_the_file() -> None:
    end = ReservePolicy(RESERVE_ALIGN, 64 * RESERVE_ALIGN).reserve_end
    # A chunk past the mark when the need is inside it.
    assert end(0, 100, 4 * RESERVE_ALIGN, 100 * RESERVE_ALIGN) == 4 * RESERVE_ALIGN
    # The need itself (rounded up to a page) when it goes further than a chunk.
    assert end(0, 5 * RESERVE_ALIGN + 1, RESERVE_ALIGN, 100 * RESERVE_ALIGN) == 6 * RESERVE_ALIGN
    # Never past the file.
    assert end(RESERVE_ALIGN, RESERVE_ALIGN + 1, 64 * RESERVE_ALIGN, 3 * RESERVE_ALIGN + 5) == (
        3 * RESERVE_ALIGN + 5
    )


def test_policies_are_bounded_and_ordered() -> None:
    for policy in (COMMITLOG_RESERVE, CONSUME_QUEUE_RESERVE, INDEX_ENTRIES_RESERVE):
        assert policy.min_chunk % RESERVE_ALIGN == 0
        assert policy.min_chunk <= policy.max_chunk <= 64 * MIB
    with pytest.raises(ValueError):
        ReservePolicy(2 * RESERVE_ALIGN, RESERVE_ALIGN)
    with pytest.raises(ValueError):
        ReservePolicy(RESERVE_ALIGN + 1, 2 * RESERVE_ALIGN)


def test_a_new_segment_is_sparse_and_reserves_a_chunk_on_the_first_write(tmp_path: Path) -> None:
    policy = ReservePolicy(4 * RESERVE_ALIGN, 16 * RESERVE_ALIGN)
    size = 64 * RESERVE_ALIGN
    mf = MappedFile.create(tmp_path / "seg", 0, size, policy)
    try:
        assert os.stat(mf.path).st_size == size
        assert allocated(mf.path) == 0
        assert mf.reserved == 0
        mf.reserve(10)
        assert mf.reserved == 4 * RESERVE_ALIGN
        assert allocated(mf.path) == 4 * RESERVE_ALIGN
        # Inside the mark: no new reservation.
        mf.reserve(4 * RESERVE_ALIGN)
        assert mf.reserved == 4 * RESERVE_ALIGN
    finally:
        mf.destroy()


def test_reopened_short_file_is_extended_sparse(tmp_path: Path) -> None:
    path = tmp_path / "seg"
    path.write_bytes(b"x" * 100)
    mf = MappedFile.open(path, 0, 16 * RESERVE_ALIGN, CONSUME_QUEUE_RESERVE)
    try:
        assert os.stat(path).st_size == 16 * RESERVE_ALIGN
        assert allocated(path) <= RESERVE_ALIGN
        assert mf.mm[:100] == b"x" * 100
    finally:
        mf.close()


def test_index_slot_pages_are_reserved_one_by_one_then_the_whole_table(tmp_path: Path) -> None:
    slots = 64 * RESERVE_ALIGN // INDEX_SLOT_SIZE  # a 64-page slot table
    size = IndexFile.file_size(slots, 1000)
    mf = MappedFile.create(tmp_path / "idx", 0, size, INDEX_ENTRIES_RESERVE)
    f = IndexFile(mf, slots, 1000)
    try:
        slots_per_page = RESERVE_ALIGN // INDEX_SLOT_SIZE
        page_of = [(INDEX_HEADER_SIZE + n * slots_per_page * INDEX_SLOT_SIZE) for n in range(64)]
        before = allocated(mf.path)
        f.put_key((page_of[10] - INDEX_HEADER_SIZE) // INDEX_SLOT_SIZE, 100, 1)
        # One slot page more (plus the entries' first chunk).
        entries = INDEX_ENTRIES_RESERVE.min_chunk
        assert allocated(mf.path) <= before + RESERVE_ALIGN + entries + RESERVE_ALIGN
        assert not f.slots_reserved()
        key = 20
        while not f.slots_reserved():
            f.put_key((page_of[key] - INDEX_HEADER_SIZE) // INDEX_SLOT_SIZE, 100 + key, 1)
            key += 1
        # An eighth of the pages one at a time, then the rest in one call.
        assert key - 20 == 65 // SLOT_TABLE_WHOLE_AFTER
        table_end = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE
        assert allocated(mf.path) >= table_end
    finally:
        mf.destroy()


def test_fresh_store_with_a_few_messages_uses_little_disk(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = StoreConfig(store_path_root_dir=root, clean_resource_interval=3_600_000)
    store = open_store(config)
    try:
        for i in range(200):
            put_ok(store, msg(f"T{i % 4}", b"x" * 1024, queue_id=i % 8, keys=f"k{i}"))
    finally:
        store.close()
    files = [p for p in root.rglob("*") if p.is_file()]
    commitlog = root / "commitlog" / f"{0:020d}"
    assert os.stat(commitlog).st_size == config.mapped_file_size_commit_log
    for cq in (root / "consumequeue").rglob("0" * 20):
        assert os.stat(cq).st_size == config.mapped_file_size_consume_queue
    (index,) = (root / "index").iterdir()
    assert os.stat(index).st_size == IndexFile.file_size(
        config.max_hash_slot_num, config.max_index_num
    )
    used = sum(allocated(p) for p in files)
    # 1 MiB of CommitLog, 32 queues x 16 KiB, an index header, entries chunk and ~400 slot
    # pages (two keys per message): about 3.5 MiB, where whole segments took 2 GB.
    assert used < 8 * MIB, used


def test_reopened_store_reserves_again_as_it_writes(open_small: StoreFactory) -> None:
    size = 4 * COMMITLOG_RESERVE.min_chunk
    store = open_small(mapped_file_size_commit_log=size)
    put_ok(store, msg(body=b"a" * 100))
    store.close()
    store = open_small(mapped_file_size_commit_log=size)
    mf = store.commitlog.mfq.last()
    assert mf is not None
    # Reserved again (by the prefault thread or the append) before it is written.
    put_ok(store, msg(body=b"b" * 100))
    assert mf.wrote_position <= mf.reserved < mf.file_size
    first, second = read_queue(store, "T", 0)
    assert b"a" * 100 in first and b"b" * 100 in second


def test_a_new_index_file_reads_no_page_before_reserving_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On tmpfs a read of a hole in a shared mapping allocates the page, and on a full one
    kills the process with SIGBUS (tests/crash/test_disk_full.py met it when the index rolled
    over to a new file): a new index file reserves its header before reading it, and looks
    for no torn insert among entries it cannot hold."""
    events: list[str] = []
    reserve_range, read_header = MappedFile.reserve_range, IndexFile._read_header

    def reserving(mf: MappedFile, start: int, end: int) -> None:
        events.append(f"reserve {start}-{end}")
        reserve_range(mf, start, end)

    def reading(f: IndexFile) -> None:
        events.append("read header")
        read_header(f)

    monkeypatch.setattr(MappedFile, "reserve_range", reserving)
    monkeypatch.setattr(IndexFile, "_read_header", reading)
    monkeypatch.setattr(IndexFile, "_undo_torn_insert", lambda f: events.append("scan entries"))
    size = IndexFile.file_size(64, 100)
    mf = MappedFile.create(tmp_path / "new", 0, size, INDEX_ENTRIES_RESERVE)
    try:
        IndexFile(mf, 64, 100, created=True)
    finally:
        mf.close()
    assert events == [f"reserve 0-{INDEX_HEADER_SIZE}", "read header"]
    events.clear()
    mf = MappedFile.open(tmp_path / "new", 0, size, INDEX_ENTRIES_RESERVE)
    try:
        IndexFile(mf, 64, 100)  # a reopened file may hold a torn insert
    finally:
        mf.close()
    assert events == [f"reserve 0-{INDEX_HEADER_SIZE}", "read header", "scan entries"]


def test_data_ends_at_the_first_hole(tmp_path: Path) -> None:
    """What recovery and readers of never-written bytes stay below: reading a hole through a
    mapping on a full tmpfs kills the reader with SIGBUS (tests/crash/test_disk_full.py)."""
    size = 16 * RESERVE_ALIGN
    mf = MappedFile.create(tmp_path / "seg", 0, size, CONSUME_QUEUE_RESERVE)
    try:
        assert mf.data_end(0) == 0
        for start, end in ((0, 2 * RESERVE_ALIGN), (5 * RESERVE_ALIGN, 6 * RESERVE_ALIGN)):
            mf.reserve_range(start, end)
            mf.mm[start:end] = b"\x01" * (end - start)
        assert mf.data_end(0) == mf.data_end(RESERVE_ALIGN) == 2 * RESERVE_ALIGN
        assert mf.data_end(3 * RESERVE_ALIGN) == 3 * RESERVE_ALIGN  # in a hole
        assert mf.data_end(5 * RESERVE_ALIGN) == 6 * RESERVE_ALIGN
        assert mf.data_end(size) == size
        mf.mm[:] = b"\x01" * size
        assert mf.data_end(0) == size
    finally:
        mf.destroy()
    with pytest.raises(ValueError, match="closed"):  # what a reader of a removed file meets
        mf.data_end(0)


def test_a_query_skips_an_index_file_removed_meanwhile(tmp_path: Path) -> None:
    """A key query reads a slot page it has not reserved only after asking where the file's
    data ends; a file retention closed meanwhile raises ValueError, as its mapping would,
    which the query takes as the file being gone."""
    mf = MappedFile.create(tmp_path / "idx", 0, IndexFile.file_size(64, 100), INDEX_ENTRIES_RESERVE)
    f = IndexFile(mf, 64, 100, created=True)
    assert f.put_key(7, 1000, 1)
    reopened = IndexFile(MappedFile.open(mf.path, 0, mf.file_size, INDEX_ENTRIES_RESERVE), 64, 100)
    mf.close()
    out: list[int] = []
    reopened.select("absent", 10, 0, 1 << 62, out)  # its slot page not reserved by this object
    reopened.mf.close()
    with pytest.raises(ValueError):
        reopened.select("absent", 10, 0, 1 << 62, out)
    assert out == []


@pytest.mark.parametrize(("zero_run_pages", "later_zeroed"), [(2, False), (8, True)])
def test_zeroing_past_a_cut_counts_holes_as_zeros_and_reads_none(
    tmp_path: Path, zero_run_pages: int, later_zeroed: bool
) -> None:
    """Stale bytes past a cut are zeroed until enough zeros follow; a hole is zeros without
    being read, and stays a hole."""
    page = RESERVE_ALIGN
    mf = MappedFile.create(tmp_path / "seg", 0, 16 * page, CONSUME_QUEUE_RESERVE)
    try:
        for at in (0, 6 * page):  # stale data, a hole of five pages, stale data
            mf.reserve_range(at, at + page)
            mf.mm[at : at + page] = b"\x07" * page
        mf.zero_from(100, zero_run_pages * page)
        assert mf.mm[:100] == b"\x07" * 100 and not any(mf.mm[100:page])
        assert any(mf.mm[6 * page : 7 * page]) is not later_zeroed
        assert allocated(mf.path) == 2 * page
    finally:
        mf.destroy()


def test_a_queue_scan_ends_where_its_data_does(tmp_path: Path) -> None:
    """A unit reaching into a hole was never written whole: the scan ends before it."""
    mf = MappedFile.create(tmp_path / "cq", 0, 4 * RESERVE_ALIGN, CONSUME_QUEUE_RESERVE)
    try:
        mf.reserve_range(0, RESERVE_ALIGN)
        units = RESERVE_ALIGN // CQ_UNIT_SIZE + 1  # the last one straddles into the hole
        written = b"".join(CQ_UNIT.pack(100 * n, 100, 7) for n in range(units))
        mf.mm[:RESERVE_ALIGN] = written[:RESERVE_ALIGN]
        assert ConsumeQueue._scan(mf) == (units - 1) * CQ_UNIT_SIZE
        assert allocated(mf.path) == RESERVE_ALIGN
    finally:
        mf.destroy()
