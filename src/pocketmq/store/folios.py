"""Huge page-cache folios for a CommitLog written fast under ASYNC_FLUSH: why, and when.

Each 4 KiB page of a mapping that a flush writes back is first made clean and read-only, with
a TLB flush on every CPU running the process: an inter-processor interrupt per page. perf
counted about one a page, 64,000 in a 200,000-put `store bench`, and the event loop, taking
them on the other CPU, lost about a third of its puts' throughput to them (BENCHMARKS.md,
"Huge folios for a fast CommitLog"). With the mapping advised MADV_HUGEPAGE, the prefault
thread's faults fill the page cache with PMD-sized folios (2 MiB on x86-64), mapped whole
and cleaned with one flush each: about 150 interrupts for the same run.

The kernel keeps a folio's dirtiness whole, so every flush writes back all of the folio that
holds the write position: 40 syncs of 2 KiB each wrote 82 MB where 4 KiB pages wrote 320 KiB.
Hence the rules here:

- never under SYNC_FLUSH (MessageStore does not ask), where every put is followed by a sync;
- huge folios only while the log is written fast enough that a folio per flush interval is at
  most an eighth of what the interval writes (``FolioChoice``: 32 MiB/s at RocketMQ's 500 ms);
- when the writes have slowed down for a while, the folios from the one holding the write
  position to the prefault mark are written back and dropped (``prefault.fault_in_as``), so
  that they are faulted in again as 4 KiB pages: a trickle after a burst must not rewrite
  2 MiB on each flush for hours;
- the CommitLog's blocks are reserved in folio-aligned chunks (reserve.py): a write into a
  folio makes the file system allocate blocks under the whole folio, and on a full disk an
  allocation that fails in a page fault is a SIGBUS.
"""

from __future__ import annotations

from pathlib import Path

_PMD_SIZE = Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
# A folio larger than this (arm64 with 64 KiB pages has 512 MiB PMDs) would be rewritten
# whole on every flush and held ahead by every reservation: not worth it. (It also divides
# the CommitLog's reservation chunks, reserve.py.)
_LARGEST = 2 << 20


def _huge_folio_size() -> int:
    try:
        size = int(_PMD_SIZE.read_text())
    except (OSError, ValueError):  # no transparent huge pages in this kernel, or not Linux
        return 0
    return size if 0 < size <= _LARGEST and size & (size - 1) == 0 else 0


# The size of a huge folio; 0 where the kernel has none to offer (the advice is then never
# given, and reservations stay page-aligned).
HUGE_FOLIO = _huge_folio_size()

# The write rate is measured over at least this long before the choice changes.
SAMPLE_S = 0.25
# Huge folios are given up only after the rate stayed low this long: each time, the pages
# faulted in ahead are synced, dropped and faulted in again (up to the prefault window,
# 32 MiB), which a writer pausing for a moment should not cost.
SLOW_S = 2.0
# A folio rewritten per flush interval is at most 1/SHARE of what the interval writes.
SHARE = 8


class FolioChoice:
    """Whether the CommitLog's next pages are to be faulted in as huge folios, from the write
    rate the prefault thread samples: on at ``on_rate`` bytes a second, off again once it has
    stayed below half of that for SLOW_S (so that a rate near the threshold, or a pause, does
    not switch back and forth)."""

    __slots__ = ("_since", "_slow_from", "huge", "on_rate")

    def __init__(self, flush_interval_ms: int, folio: int = HUGE_FOLIO) -> None:
        self.on_rate = SHARE * folio * 1000 / max(flush_interval_ms, 1)
        self.huge = False
        self._since: tuple[float, int] | None = None
        self._slow_from: float | None = None

    def sample(self, now: float, offset: int) -> None:
        """Note that the log's write offset is ``offset`` at monotonic time ``now``."""
        since = self._since
        if since is None or offset < since[1]:  # the first sample, or a truncation
            self._since = (now, offset)
            return
        elapsed = now - since[0]
        if elapsed < SAMPLE_S:
            return
        rate = (offset - since[1]) / elapsed
        self._since = (now, offset)
        if not self.huge:
            self.huge = rate >= self.on_rate
        elif rate >= self.on_rate / 2:
            self._slow_from = None
        else:
            if self._slow_from is None:
                self._slow_from = since[0]
            if now - self._slow_from >= SLOW_S:
                self.huge = False
                self._slow_from = None
