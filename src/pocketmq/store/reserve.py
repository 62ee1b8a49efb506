"""How far ahead of a write position disk blocks are reserved: the chunk arithmetic.

Store files keep their full logical size (sparse, set with ftruncate) so that every offset and
the on-disk format stay RocketMQ's, but blocks are reserved with posix_fallocate only a chunk
ahead of where the file is written. A byte is never written through a mapping before its block
is reserved: on a full disk the reservation fails with a clean OSError instead of the SIGBUS a
write into an unreserved page of a mapping would raise.

A chunk starts at the policy's minimum and doubles each time the previous one was used up in
less than ``FAST_S`` (the file is being written fast), up to the maximum; it halves back
towards the minimum when a chunk lasted longer than ``SLOW_S``. No I/O here.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

from pocketmq.store.folios import HUGE_FOLIO

# Reservations start and end on page boundaries: a page written through a mapping is written
# back whole, so every block under it must be reserved.
RESERVE_ALIGN = max(mmap.PAGESIZE, 4096)
# A chunk used up faster than this doubles the next one; slower than SLOW_S halves it.
FAST_S = 1.0
SLOW_S = 30.0


def align_down(pos: int, unit: int = RESERVE_ALIGN) -> int:
    return pos - pos % unit


def align_up(pos: int, unit: int = RESERVE_ALIGN) -> int:
    return -(-pos // unit) * unit


@dataclass(frozen=True, slots=True)
class ReservePolicy:
    """Chunk bounds for one kind of file, and where a reservation may end: on a multiple of
    ``align`` (a multiple of RESERVE_ALIGN: the largest page-cache folio the file's mapping may
    be faulted in with)."""

    min_chunk: int
    max_chunk: int
    align: int = RESERVE_ALIGN

    def __post_init__(self) -> None:
        if not 0 < self.min_chunk <= self.max_chunk:
            raise ValueError(f"bad chunk bounds {self.min_chunk}..{self.max_chunk}")
        if self.align <= 0 or self.align % RESERVE_ALIGN:
            raise ValueError(f"the alignment must be a multiple of {RESERVE_ALIGN}")
        if self.min_chunk % self.align or self.max_chunk % self.align:
            raise ValueError(f"chunk bounds must be multiples of {self.align}")

    def next_chunk(self, chunk: int, elapsed_s: float) -> int:
        """The next chunk, given the last one and how long it lasted (0: the first chunk)."""
        if chunk <= 0:
            return self.min_chunk
        if elapsed_s < FAST_S:
            return min(chunk * 2, self.max_chunk)
        if elapsed_s > SLOW_S:
            return max(chunk // 2, self.min_chunk)
        return min(max(chunk, self.min_chunk), self.max_chunk)

    def reserve_end(self, reserved: int, needed: int, chunk: int, file_size: int) -> int:
        """Where a reservation that must cover ``needed`` should end: at least a chunk past
        the current mark and past ``needed``, aligned, never past the file's end."""
        return min(align_up(max(needed, reserved + chunk), self.align), file_size)


# The CommitLog: 2 MiB holds ~2,000 1 KiB records, so a quiet store pays one fallocate per
# two thousand messages and 2 MiB of disk; a busy one grows to 64 MiB chunks (one call per
# ~0.3 s at 200 MB/s, 6% of a default 1 GiB segment held ahead). Its pages may be huge folios
# (folios.py): reservations end on folio boundaries, and the first is a 2 MiB chunk.
COMMITLOG_RESERVE = ReservePolicy(2 << 20, 64 << 20, align=max(RESERVE_ALIGN, HUGE_FOLIO))
# A consume queue: 16 KiB is 819 units; a store has one queue per topic and queue id, so the
# minimum times the number of queues is a fresh store's consume-queue footprint.
CONSUME_QUEUE_RESERVE = ReservePolicy(16 << 10, 1 << 20)
# Index entries (20 bytes, one or more per message): 64 KiB is 3,276 entries.
INDEX_ENTRIES_RESERVE = ReservePolicy(64 << 10, 4 << 20)
# An index file's slot table is written at random: pages are reserved as they are first
# touched until this share of them is, then the rest of the table at once, so that a file
# costs at most (pages / SLOT_TABLE_WHOLE_AFTER + 1) reservation calls.
SLOT_TABLE_WHOLE_AFTER = 8
