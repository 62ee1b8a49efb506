"""ConsumeQueue: the per topic/queue index of CommitLog records, fixed 20-byte units.

    unit = commitlog offset (8) | record size (4) | tag hash code (8)   big-endian

Unit ``n`` lives at byte ``n * 20`` of the queue; files hold ``mapped_file_size_consume_queue``
bytes each and are named by their first byte's offset (20 digits). A unit whose offset is
negative or whose size is not positive ends the queue during recovery. Units for queue offsets
that no longer exist in the CommitLog (the queue was created after retention removed its start)
are blank: offset 0, size 2**31-1, tags 0, as RocketMQ's fillPreBlank writes them.

A put's units for one queue are written by one call, ``consume_queue_put_requests`` (native in
``pocketmq._speedups``, this module's ``*_py`` function the reference), into the reserved part
of the queue's last file; whatever needs more than a write (a new file, a reservation, a gap
or a unit already present) goes through ``put``, record by record.
"""

from __future__ import annotations

import logging
import mmap
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from pocketmq.protocol.native import select
from pocketmq.store.dispatch import DispatchRequest, goes_to_consume_queue, next_queued
from pocketmq.store.layout import CQ_UNIT_SIZE
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.mapped_file_queue import MappedFileQueue
from pocketmq.store.reserve import CONSUME_QUEUE_RESERVE

log = logging.getLogger(__name__)

_UNIT = struct.Struct(">qiq")
# The size a blank unit carries (a unit written over a gap, never a record's size).
BLANK_UNIT_SIZE = 0x7FFFFFFF
BLANK_UNIT = _UNIT.pack(0, BLANK_UNIT_SIZE, 0)


def write_unit(mm: mmap.mmap | bytearray, pos: int, unit: bytes) -> None:
    """Write a packed unit, its size last in one store (a 4-byte slice assignment is one
    memcpy): recovery keeps units whose size is set, so a kill leaves a unit whole or absent,
    never one with a cut offset or size (struct.pack_into writes an int a byte at a time)."""
    mm[pos : pos + 8] = unit[:8]
    mm[pos + 12 : pos + 20] = unit[12:]
    mm[pos + 8 : pos + 12] = unit[8:12]


def consume_queue_put_requests_py(
    mm: mmap.mmap | bytearray,
    pos: int,
    limit: int,
    file_from: int,
    topic: str,
    queue_id: int,
    reqs: Sequence[DispatchRequest],
    start: int,
) -> tuple[int, int, int]:
    """Write the units of reqs[start:] that continue the queue at byte ``pos`` of a file
    starting at queue byte ``file_from``, while they fit below ``limit`` (the reserved mark).
    Records that stay out of consume queues are passed over; the first record of another
    queue, or whose unit is not the next one, or that does not fit, stops the call: where it
    stops is a record that goes to a consume queue, or the end.

    Returns (where it stopped, the new write position, the end in the CommitLog of the last
    record written or -1).
    """
    end_phy = -1
    i = start
    n = len(reqs)
    while i < n:
        r = reqs[i]
        if not goes_to_consume_queue(r.sys_flag):
            i += 1
            continue
        if (
            r.queue_id != queue_id
            or r.topic != topic
            or r.queue_offset * CQ_UNIT_SIZE != file_from + pos
            or pos + CQ_UNIT_SIZE > min(limit, len(mm))
        ):
            break
        try:
            unit = _UNIT.pack(r.phy_offset, r.size, r.tags_code)
        except struct.error:
            break  # put() raises it
        write_unit(mm, pos, unit)
        pos += CQ_UNIT_SIZE
        end_phy = r.phy_offset + r.size
        i += 1
    return i, pos, end_phy


consume_queue_put_requests = select("consume_queue_put_requests", consume_queue_put_requests_py)


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.mfq = MappedFileQueue(
            directory, file_size, min_zero_run=CQ_UNIT_SIZE, policy=CONSUME_QUEUE_RESERVE
        )
        # CommitLog offset just past the last record indexed here.
        self.max_physic_offset = -1
        # Byte offset of the first unit still backed by the CommitLog.
        self.min_logic_offset = 0

    # --- offsets (in units) ---------------------------------------------------------

    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def max_offset_in_queue(self) -> int:
        """The next queue offset to be written (= number of units)."""
        return self.mfq.max_offset() // CQ_UNIT_SIZE

    # --- writing --------------------------------------------------------------------

    def put(self, phy_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the unit for queue_offset; a unit already present is left alone (False)."""
        expect = queue_offset * CQ_UNIT_SIZE
        current = self.mfq.max_offset()
        if expect < current:
            return False
        fresh = not self.mfq.files
        if fresh:
            first_start = expect - expect % self.file_size
            mf = self.mfq.last_for_write(first_start)
            current = first_start
            self.min_logic_offset = expect
        if expect > current:
            if not fresh:  # a new queue starting late (a replica, retention) is expected
                log.warning(
                    "%s/%d: queue offset %d leaves a gap after %d; filling it with blank units",
                    self.topic,
                    self.queue_id,
                    queue_offset,
                    current // CQ_UNIT_SIZE,
                )
            while current < expect:
                mf = self._writable()
                write_unit(mf.mm, mf.wrote_position, BLANK_UNIT)
                mf.wrote_position += CQ_UNIT_SIZE
                current += CQ_UNIT_SIZE
        mf = self._writable()
        write_unit(mf.mm, mf.wrote_position, _UNIT.pack(phy_offset, size, tags_code))
        mf.wrote_position += CQ_UNIT_SIZE
        self.max_physic_offset = phy_offset + size
        return True

    def put_requests(self, reqs: Sequence[DispatchRequest], start: int) -> tuple[int, int]:
        """``put`` for the records of reqs[start:] that belong to this queue, up to the first
        record of another queue; returns its position (len(reqs) at the end) and the queue
        offset past the last unit written (-1 when none was: they were all present). reqs[start]
        goes to a consume queue, and so does the record at the position returned; the records
        that stay out of them are passed over.

        Raises:
            OSError: a file cannot be created or its blocks reserved (the units before it
                are written).
        """
        i = start
        n = len(reqs)
        wrote = -1
        while i < n:
            r = reqs[i]
            if r.queue_id != self.queue_id or r.topic != self.topic:
                break
            files = self.mfq.files
            # The next unit of a queue with files: written with those after it in one call,
            # as many as fit the reservation (a run of a coalesced put is often one unit).
            if files:
                mf = files[-1]
                if r.queue_offset * CQ_UNIT_SIZE == mf.file_from_offset + mf.wrote_position:
                    if mf.wrote_position + CQ_UNIT_SIZE > mf.reserved:
                        self._writable()
                    j, end = self.put_in_place(reqs, i)
                    if end >= 0:
                        wrote = end
                    if j > i:
                        i = j
                        continue
            if self.put(r.phy_offset, r.size, r.tags_code, r.queue_offset):
                wrote = r.queue_offset + 1
            i = next_queued(reqs, i + 1)
        return i, wrote

    def put_in_place(self, reqs: Sequence[DispatchRequest], start: int) -> tuple[int, int]:
        """The units of reqs[start:] that continue this queue in its last file, below its
        reservation, written in one call (no I/O: ``put_requests`` reserves first). Returns
        the position of the first request left and the queue offset past the last unit
        written (-1 when none was). The queue has a file."""
        mf = self.mfq.files[-1]
        j, mf.wrote_position, end_phy = consume_queue_put_requests(
            mf.mm, mf.wrote_position, mf.reserved, mf.file_from_offset, self.topic,
            self.queue_id, reqs, start,
        )  # fmt: skip
        if end_phy < 0:
            return j, -1
        self.max_physic_offset = end_phy
        return j, (mf.file_from_offset + mf.wrote_position) // CQ_UNIT_SIZE

    def _writable(self) -> MappedFile:
        """The file to write the next unit to, its blocks reserved (see mapped_file.py).

        Raises:
            OSError: a file cannot be created or its blocks reserved.
        """
        mf = self.mfq.last_for_write()
        end = mf.wrote_position + CQ_UNIT_SIZE
        if end > mf.reserved:
            mf.reserve(end)
        return mf

    # --- reading --------------------------------------------------------------------

    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tags code) of a unit, or None if it is not there."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        mf = self.mfq.find(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        if pos + CQ_UNIT_SIZE > mf.wrote_position:
            return None
        try:
            phy, size, tags = _UNIT.unpack_from(mf.mm, pos)
            return phy, size, tags
        except ValueError:
            return None

    def iter_units(self, queue_offset: int) -> Iterator[tuple[int, int, int, int]]:
        """(queue offset, commitlog offset, size, tags code) from queue_offset to the end."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        while True:
            mf = self.mfq.find(byte_offset)
            if mf is None:
                return
            pos = byte_offset - mf.file_from_offset
            end = mf.wrote_position
            if pos >= end:
                return
            try:
                view = mf.mm[pos:end]
            except ValueError:
                return
            qo = byte_offset // CQ_UNIT_SIZE
            for phy, size, tags in _UNIT.iter_unpack(view):
                yield qo, phy, size, tags
                qo += 1
            byte_offset = mf.file_from_offset + end
            if end < mf.file_size:
                return

    def last_unit(self) -> tuple[int, int, int] | None:
        n = self.max_offset_in_queue()
        return self.unit(n - 1) if n > 0 else None

    # --- recovery -------------------------------------------------------------------

    def load(self) -> None:
        self.mfq.load()

    def recover(self) -> None:
        """Find the last valid unit (from the third-last file on) and cut the queue there."""
        files = self.mfq.files
        if not files:
            return
        start = max(0, len(files) - 3)
        end_offset = files[start].file_from_offset
        for mf in files[start:]:
            pos = self._scan(mf)
            end_offset = mf.file_from_offset + pos
            if pos < mf.file_size:
                break
        self.mfq.truncate_dirty(end_offset)
        last = self.last_unit()
        self.max_physic_offset = last[0] + last[1] if last and last[1] != 0x7FFFFFFF else -1
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.min_offset())

    @staticmethod
    def _scan(mf: MappedFile) -> int:
        pos = 0
        # Units are written in order, so none lies past the data's end (nor is read there:
        # see MappedFile.data_end); the copy of the rest of a sparse file is saved too.
        data_end = mf.data_end(0)
        for phy, size, _tags in _UNIT.iter_unpack(mf.mm[: data_end - data_end % CQ_UNIT_SIZE]):
            if phy < 0 or size <= 0:
                break
            pos += CQ_UNIT_SIZE
        return pos

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop units that point at or past phy_offset (the CommitLog was cut there)."""
        n = self.max_offset_in_queue()
        lo = self.min_offset_in_queue()
        # Units are in commitlog order: find the first one at or past phy_offset.
        hi = n
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.unit(mid)
            if u is None or (u[1] != 0x7FFFFFFF and u[0] >= phy_offset):
                hi = mid
            else:
                lo = mid + 1
        if lo < n:
            end_offset = lo * CQ_UNIT_SIZE
            log.info(
                "%s/%d: dropping %d units past commitlog offset %d",
                self.topic,
                self.queue_id,
                n - lo,
                phy_offset,
            )
            self.mfq.truncate_dirty(end_offset)
        last = self.last_unit()
        self.max_physic_offset = last[0] + last[1] if last and last[1] != 0x7FFFFFFF else -1

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Move the queue's min offset to the first unit still in the CommitLog."""
        lo = self.min_offset_in_queue()
        hi = self.max_offset_in_queue()
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.unit(mid)
            if u is None or (u[1] != 0x7FFFFFFF and u[0] >= commitlog_min):
                hi = mid
            else:
                lo = mid + 1
        self.min_logic_offset = lo * CQ_UNIT_SIZE

    def delete_expired_files(self, commitlog_min: int) -> int:
        """Delete files whose every unit points below commitlog_min (never the last file)."""
        deleted = 0
        while len(self.mfq.files) > 1:
            first = self.mfq.files[0]
            try:
                phy, size, _ = _UNIT.unpack_from(first.mm, first.file_size - CQ_UNIT_SIZE)
            except ValueError:
                break
            if size != 0x7FFFFFFF and phy + size > commitlog_min:
                break
            self.mfq.delete_first()
            deleted += 1
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.min_offset())
        return deleted

    def flush(self) -> None:
        self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()

    def destroy(self) -> None:
        for mf in list(self.mfq.files):
            mf.destroy()
        self.mfq.files.clear()
