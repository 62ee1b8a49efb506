"""The consume-queue walk of a pull (DefaultMessageStore.getMessage's loop) over mapped bytes,
in one call: a queue's units from an offset on, filtered by tag hash code (and, when given, by a
check of the record itself), their CommitLog records copied into one body.

``pull_scan`` (native in ``pocketmq._speedups``, this module's ``pull_scan_py`` the reference,
bound through ``protocol.native.select``) reads segments as ``store.mapped_file_queue`` keeps
them: a list of equal-size segments, each with ``file_from_offset``, ``wrote_position`` and its
mapping ``mm``, found by index arithmetic from the first. It stops where ``pull_read`` has always
stopped: at the scan, count and byte limits, at the end of what a queue file holds, and it skips
(noting the removal) units whose record is blank, below the CommitLog's start, outside a segment's
written bytes or in a segment closed by retention meanwhile (its ``mm`` raises ValueError).

The native function serves the tag-hash case; given a ``record_filter`` (a SQL92 selector) it
calls this reference, which runs the filter on each record. Nothing here takes a lock: the
caller holds the GIL, and the native walk runs no Python code while it holds a mapping's buffer,
so retention cannot close a segment under it.

No I/O here beyond reading the mappings.
"""

from __future__ import annotations

import mmap
import struct
from array import array
from collections.abc import Callable, Sequence
from typing import Protocol

from pocketmq.protocol.native import select
from pocketmq.store.layout import CQ_UNIT_SIZE

_UNIT = struct.Struct(">qiq")
# The size a blank consume-queue unit carries (consume_queue.BLANK_UNIT_SIZE).
BLANK_UNIT_SIZE = 0x7FFFFFFF


class Segment(Protocol):
    """What the walk reads of a segment (store.mapped_file.MappedFile)."""

    @property
    def file_from_offset(self) -> int: ...
    @property
    def wrote_position(self) -> int: ...
    @property
    def mm(self) -> mmap.mmap | bytes: ...


# body, units ((queue offset, size) per record, native int64 pairs), next begin offset, the
# CommitLog offset of the last unit scanned, whether a unit's record was gone.
ScanResult = tuple[bytes, bytes, int, int, bool]


def _find(files: Sequence[Segment], file_size: int, offset: int) -> Segment | None:
    """MappedFileQueue.find over a snapshot of its list."""
    if not files:
        return None
    idx = (offset - files[0].file_from_offset) // file_size
    return files[idx] if 0 <= idx < len(files) else None


def _read(files: Sequence[Segment], file_size: int, phy: int, size: int) -> bytes | None:
    """CommitLog.read: the record's bytes, None when its segment is gone or the range is not
    written."""
    seg = _find(files, file_size, phy)
    if seg is None:
        return None
    pos = phy - seg.file_from_offset
    if size <= 0 or pos < 0 or pos + size > seg.wrote_position:
        return None
    try:
        mm = seg.mm
        if pos + size > len(mm):
            return None
        return mm[pos : pos + size]
    except ValueError:  # closed by retention meanwhile
        return None


def pull_scan_py(
    cq_files: Sequence[Segment],
    cq_file_size: int,
    offset: int,
    cl_files: Sequence[Segment],
    cl_file_size: int,
    commitlog_min: int,
    tag_codes: frozenset[int] | None,
    record_filter: Callable[[bytes], bool] | None,
    max_count: int,
    max_bytes: int,
    max_scan: int,
) -> ScanResult:
    """The records a pull from queue offset ``offset`` returns.

    Args:
        cq_files, cq_file_size: the consume queue's segments and their size.
        cl_files, cl_file_size: the CommitLog's segments and their size.
        commitlog_min: the CommitLog's first offset; units below it are gone.
        tag_codes: the tag hash codes a unit must carry; None lets every unit pass.
        record_filter: a check of each record that passed the units' filter; None: none.
        max_count, max_bytes: at most this many records; once one is taken, no record that
            would take the body past ``max_bytes``.
        max_scan: at most this many units examined.

    Returns:
        The body, the (queue offset, size) of each of its records as native int64 pairs, the
        offset the next pull starts at, the CommitLog offset of the last unit examined (0
        without one) and whether a unit's record was gone.
    """
    body: list[bytes] = []
    units = array("q")
    total = scanned = count = 0
    next_begin = offset
    last_phy = 0
    removing = False
    byte_offset = offset * CQ_UNIT_SIZE
    done = False
    while not done and scanned < max_scan:
        seg = _find(cq_files, cq_file_size, byte_offset)
        if seg is None:
            break
        pos = byte_offset - seg.file_from_offset
        end = seg.wrote_position
        if pos < 0 or pos >= end:
            break
        # One unit past the scan limit is enough to stop there; no need to copy the rest.
        stop = min(end, pos + (max_scan - scanned + 1) * CQ_UNIT_SIZE)
        try:
            view = seg.mm[pos:stop]
        except ValueError:  # closed by retention meanwhile
            break
        whole = len(view) - len(view) % CQ_UNIT_SIZE
        qo = byte_offset // CQ_UNIT_SIZE
        for phy, size, tags in _UNIT.iter_unpack(memoryview(view)[:whole]):
            if scanned >= max_scan:
                done = True
                break
            if count and total + size > max_bytes:
                next_begin = qo
                done = True
                break
            scanned += 1
            next_begin = qo + 1
            last_phy = phy
            qo += 1
            if size == BLANK_UNIT_SIZE or phy < commitlog_min:
                removing = True
                continue
            if tag_codes is not None and tags not in tag_codes:
                continue
            raw = _read(cl_files, cl_file_size, phy, size)
            if raw is None:
                removing = True
                continue
            if record_filter is not None and not record_filter(raw):
                continue
            body.append(raw)
            units.append(qo - 1)
            units.append(size)
            total += size
            count += 1
            if count >= max_count:
                done = True
                break
        following = seg.file_from_offset + end
        if end < cq_file_size or following <= byte_offset:
            break
        byte_offset = following
    return b"".join(body), units.tobytes(), next_begin, last_phy, removing


pull_scan = select("pull_scan", pull_scan_py)
