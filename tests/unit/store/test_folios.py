"""Huge folios for a CommitLog written fast (folios.py): the choice from the write rate, the
folio-aligned reservations, and the advice taken back without losing a byte. The advice is read
from the kernel's own record of it: the ``hg`` (MADV_HUGEPAGE) and ``nh`` (MADV_NOHUGEPAGE)
flags of the mapping's VMAs in /proc/self/smaps."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest
from store_helpers import StoreFactory, mapping_vmas, msg, put_ok, read_queue

from pocketmq.clock import FakeClock
from pocketmq.store.config import FlushDiskType
from pocketmq.store.folios import HUGE_FOLIO, SAMPLE_S, SHARE, SLOW_S, FolioChoice
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.prefault import MADV_POPULATE_WRITE, fault_in_as, populate
from pocketmq.store.reserve import COMMITLOG_RESERVE, RESERVE_ALIGN, ReservePolicy
from waiting import wait_until_sync

MIB = 1 << 20
FOLIO = HUGE_FOLIO or 2 * MIB
PAGE = mmap.PAGESIZE

needs_huge_folios = pytest.mark.skipif(
    not HUGE_FOLIO, reason="the kernel offers no transparent huge pages"
)


def vma_flags(mf: MappedFile) -> set[str]:
    """The VmFlags of every VMA of mf's mapping, together."""
    return {flag for _, _, flags in mapping_vmas(mf) for flag in flags}


def resident_pages(mf: MappedFile, start: int, end: int) -> int:
    """How many pages of mf's [start, end) are in the page cache (mincore(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    pages = ctypes.create_string_buffer((end - start) // PAGE)
    assert libc.mincore(mf.address + start, end - start, pages) == 0, ctypes.get_errno()
    return sum(b & 1 for b in pages.raw)


# --- the choice -----------------------------------------------------------------------


def test_the_threshold_is_a_folio_per_flush_interval_times_the_share() -> None:
    # RocketMQ's flushIntervalCommitLog of 500 ms and 2 MiB folios: 32 MiB/s.
    assert FolioChoice(500, 2 * MIB).on_rate == SHARE * 2 * MIB * 2 == 32 * MIB
    # Flushing more often rewrites the head's folio more often: a faster log is needed.
    assert FolioChoice(50, 2 * MIB).on_rate == 10 * FolioChoice(500, 2 * MIB).on_rate


def test_huge_folios_follow_the_rate_with_hysteresis() -> None:
    choice = FolioChoice(1000, MIB)  # on at 8 MiB/s, off after SLOW_S below 4 MiB/s
    t, offset = 100.0, 0

    def run(rate: float, seconds: float) -> bool:
        nonlocal t, offset
        t += seconds
        offset += int(rate * seconds)
        choice.sample(t, offset)
        return choice.huge

    choice.sample(t, offset)  # the first sample only starts the measure
    assert not run(100 * MIB, SAMPLE_S / 2)  # not measured long enough yet
    assert run(100 * MIB, SAMPLE_S / 2)
    assert run(5 * MIB, 10 * SLOW_S)  # below the threshold, above half of it: still huge
    assert run(3 * MIB, SLOW_S / 2)  # a pause...
    assert run(0, SLOW_S / 4)
    assert run(5 * MIB, SAMPLE_S)  # ...that ends starts the slow time again
    assert run(0, SLOW_S / 2)
    assert not run(0, SLOW_S / 2)  # slow for SLOW_S
    assert not run(7 * MIB, SAMPLE_S)  # above half, below the threshold: still pages
    assert run(8 * MIB, SAMPLE_S)


def test_a_truncated_log_restarts_the_measure() -> None:
    choice = FolioChoice(1000, MIB)
    choice.sample(0.0, 100 * MIB)
    choice.sample(SAMPLE_S, 10)  # the offset went back: no rate, no change
    assert not choice.huge
    choice.sample(2 * SAMPLE_S, 10 + 100 * MIB)
    assert choice.huge


# --- reservations ---------------------------------------------------------------------


def test_commitlog_reservations_end_on_folio_boundaries() -> None:
    assert COMMITLOG_RESERVE.align == max(RESERVE_ALIGN, HUGE_FOLIO)
    policy = ReservePolicy(FOLIO, 8 * FOLIO, align=FOLIO)
    assert policy.reserve_end(0, 1, FOLIO, 64 * FOLIO) == FOLIO
    assert policy.reserve_end(FOLIO, FOLIO + RESERVE_ALIGN, FOLIO, 64 * FOLIO) == 2 * FOLIO
    assert policy.reserve_end(0, 3 * FOLIO + 1, FOLIO, 64 * FOLIO) == 4 * FOLIO
    assert policy.reserve_end(0, 1, FOLIO, FOLIO + 5) == FOLIO  # within the file
    assert policy.reserve_end(FOLIO, FOLIO + 1, FOLIO, FOLIO + 5) == FOLIO + 5


def test_a_policy_refuses_an_alignment_its_chunks_do_not_keep() -> None:
    with pytest.raises(ValueError, match="multiple of"):
        ReservePolicy(FOLIO, FOLIO, align=RESERVE_ALIGN + 1)
    with pytest.raises(ValueError, match="multiples of"):
        ReservePolicy(RESERVE_ALIGN, FOLIO, align=FOLIO)


def test_a_new_segment_reserves_whole_folios(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / "seg", 0, 16 * FOLIO, COMMITLOG_RESERVE)
    try:
        mf.reserve(1)
        assert mf.reserved % COMMITLOG_RESERVE.align == 0
        mf.reserve(mf.reserved + 1)
        assert mf.reserved % COMMITLOG_RESERVE.align == 0
    finally:
        mf.destroy()


# --- the advice, given and taken back -------------------------------------------------


@needs_huge_folios
def test_advice_taken_back_drops_the_pages_ahead_and_keeps_every_byte(tmp_path: Path) -> None:
    size = 8 * FOLIO
    mf = MappedFile.create(tmp_path / "seg", 0, size, COMMITLOG_RESERVE)
    try:
        mf.reserve(size)
        fault_in_as(mf, True)
        assert mf.huge and "hg" in vma_flags(mf)
        # The prefault mark inside a folio, which the kernel faults in whole.
        mark = 3 * FOLIO + FOLIO // 2
        if not populate(mf, 0, mark, MADV_POPULATE_WRITE):
            pytest.skip("the kernel refuses MADV_POPULATE_WRITE (Linux < 5.14)")
        mf.prefaulted = mark
        assert resident_pages(mf, 3 * FOLIO, 4 * FOLIO) > 0
        data = os.urandom(FOLIO + 12_345)  # the write position inside the second folio
        mf.mm[: len(data)] = data
        mf.wrote_position = len(data)

        fault_in_as(mf, False)

        assert not mf.huge
        flags = vma_flags(mf)
        assert "nh" in flags and "hg" not in flags
        # Dropped from the head's folio to the end of the mark's, the written part faulted in
        # again: the thread faults in the rest as pages.
        assert mf.prefaulted == len(data)
        assert resident_pages(mf, -(-len(data) // PAGE) * PAGE, 4 * FOLIO) == 0
        assert mf.mm[: len(data)] == data
        assert mf.mm[len(data) : 4 * FOLIO] == bytes(4 * FOLIO - len(data))
        with open(mf.path, "rb") as f:
            assert f.read(len(data)) == data
        # Written on as before.
        mf.mm[len(data) : len(data) + 3] = b"abc"
        assert mf.mm[len(data) - 1 : len(data) + 3] == data[-1:] + b"abc"
    finally:
        mf.destroy()


def test_advice_for_a_closed_file_changes_nothing_else(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / "seg", 0, 4 * FOLIO, COMMITLOG_RESERVE)
    mf.destroy()  # removed by retention meanwhile
    fault_in_as(mf, True)
    fault_in_as(mf, False)
    assert not mf.huge


# --- in a store -----------------------------------------------------------------------


def test_sync_flush_never_chooses_huge_folios(open_small: StoreFactory) -> None:
    # Every put is followed by a sync, which would write the head's whole folio.
    store = open_small(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    assert store.folio_choice is None


@needs_huge_folios
def test_a_fast_log_is_faulted_in_huge_and_back_once_it_slows(open_small: StoreFactory) -> None:
    clock = FakeClock()  # the rate the prefault thread measures is on the store's clock
    # A long flush interval lowers the threshold to what a test writes in a moment: eight
    # folios a minute, about 280 KiB/s with 2 MiB folios.
    store = open_small(
        clock=clock,
        mapped_file_size_commit_log=64 * FOLIO,
        flush_interval_commit_log=60_000,
        message_index_enable=False,
    )
    body = b"m" * 1500
    put_ok(store, msg(body=body))
    bodies = 1
    segment = store.commitlog.mfq.last()
    assert store.folio_choice is not None and segment is not None

    def writing(puts: int) -> bool:
        """puts of 1.5 KB in a sample's time: 160 are 960 KB/s, 16 are 96 KB/s."""
        nonlocal bodies
        for _ in range(puts):
            put_ok(store, msg(body=body))
            bodies += 1
        clock.advance(int(SAMPLE_S * 1000))
        return segment.huge

    for _ in range(8):
        assert not writing(16)
    wait_until_sync(lambda: writing(160), 30, "the CommitLog to be chosen huge folios")
    assert "hg" in vma_flags(segment)
    assert segment.reserved % COMMITLOG_RESERVE.align == 0 or segment.reserved == segment.file_size

    def idle() -> bool:
        clock.advance(int(SAMPLE_S * 1000))
        return not segment.huge

    wait_until_sync(idle, 30, "the idle CommitLog to go back to pages")
    assert "nh" in vma_flags(segment)
    assert segment.prefaulted >= segment.wrote_position
    put_ok(store, msg(body=b"after"))
    got = read_queue(store, "T", 0)
    assert len(got) == bodies + 1
    assert b"after" in got[-1] and all(body in record for record in got[:-1])
