"""The one walk over the records of a CommitLog segment: recovery, dispatch, ``store inspect``
and the Spark store reader all hop through segments with it. No I/O here: it reads any buffer
(an mmap, a memoryview, bytes) and knows nothing of files or clocks.

A segment holds records back to back from position 0 (the layout of one record is drawn in
pocketmq.protocol.record_codec), then one of::

    offset size  field
    0      4     TOTALSIZE     the rest of the segment, this field included
    4      4     MAGICCODE     cbd43194: a blank record, the segment is full
    8      ...   unused

    0      4     00000000      the end of data: the segment being written. Appends write a
    4      4     00000000      record's TOTALSIZE last, so a copy cut short leaves zeros here

A walk starts at a record boundary and hops from each TOTALSIZE to the next. Before it yields a
record it checks what costs nothing: the magic code, that the size fits (MIN_RECORD_SIZE at
least, and no further than the buffer's end) and, when it knows the segment's first CommitLog
offset, that the record's PHYSICALOFFSET is where the record sits. It stops at the first
position holding anything else and says why (``Stop``). What a stop means is the caller's
decision: recovery cuts the log there, inspect reports a problem, the Spark reader raises
CorruptRecordError or skips a torn tail.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import Final

from pocketmq.protocol.message import ReadableBuffer
from pocketmq.protocol.record_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    POS_PHY_OFFSET,
    RecordError,
    RecordInfo,
    decode_record_info,
)

# A v1 record with an empty body, topic and properties and IPv4 hosts.
MIN_RECORD_SIZE: Final = 91

_HEAD = struct.Struct(">iI")  # TOTALSIZE, MAGICCODE
_PHY = struct.Struct(">q")


class Stop(enum.Enum):
    """Why a walk ended."""

    LIMIT = "limit"  # the next record would start at or past the walk's limit
    SHORT = "truncated record header"  # fewer than 8 bytes left before the end
    BLANK = "blank record"  # a blank record; RecordWalk.size is its TOTALSIZE
    END_OF_DATA = "end of data"  # size 0 and magic 0
    DAMAGED = "damaged"  # not a record; RecordWalk.detail says why


class RecordWalk:
    """One walk over the records of a segment's buffer.

    While a record is being yielded, ``pos`` is where it starts and ``size`` its TOTALSIZE.
    Once the walk has ended, ``stop`` says why and ``pos`` is where: the blank record, the
    zeros, the damaged record, or the first position at or past the limit.
    """

    __slots__ = ("base_offset", "buf", "detail", "end", "limit", "magic", "pos", "size", "stop")

    def __init__(
        self,
        buf: ReadableBuffer,
        pos: int = 0,
        limit: int | None = None,
        *,
        end: int | None = None,
        base_offset: int | None = None,
    ) -> None:
        """Args:
        buf: the segment's bytes.
        pos: where the first record starts.
        limit: no record starting at or past it is walked (default: ``end``).
        end: every record must end by it (default: the buffer's length), e.g. the segment's
            write position.
        base_offset: the segment's first CommitLog offset: each record's PHYSICALOFFSET must
            be base_offset + its position. None skips that check.
        """
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.limit = self.end if limit is None else limit
        self.base_offset = base_offset
        self.stop: Stop | None = None
        self.size = 0
        self.magic = 0
        self.detail = ""

    def _ended(self, stop: Stop, pos: int, detail: str = "") -> None:
        self.stop = stop
        self.pos = pos
        self.detail = detail or stop.value

    def sizes(self) -> Iterator[int]:
        """The TOTALSIZE of each record whose header is sound, without decoding it."""
        buf, limit, end, base = self.buf, self.limit, self.end, self.base_offset
        pos = self.pos
        while True:
            if pos >= limit:
                self._ended(Stop.LIMIT, pos)
                return
            if pos + 8 > end:
                self._ended(Stop.SHORT, pos)
                return
            size, magic = _HEAD.unpack_from(buf, pos)
            self.size = size
            self.magic = magic
            if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
                if magic == BLANK_MAGIC_CODE:
                    self._ended(Stop.BLANK, pos)
                    return
                if size == 0 and magic == 0:
                    self._ended(Stop.END_OF_DATA, pos)
                    return
                self._ended(Stop.DAMAGED, pos, f"bad magic code {magic:08x}")
                return
            if size < MIN_RECORD_SIZE or size > end - pos:
                self._ended(
                    Stop.DAMAGED, pos, f"record size {size} does not fit the {end - pos} bytes left"
                )
                return
            if base is not None:
                phy = _PHY.unpack_from(buf, pos + POS_PHY_OFFSET)[0]
                if phy != base + pos:
                    self._ended(Stop.DAMAGED, pos, f"the record says it is at offset {phy}")
                    return
            self.pos = pos
            yield size
            pos += size

    def records(self, check_crc: bool = False) -> Iterator[RecordInfo]:
        """Each record decoded as dispatch needs it; one that does not decode (lengths that
        disagree, a body CRC mismatch when check_crc) ends the walk as DAMAGED."""
        buf, end = self.buf, self.end
        for _ in self.sizes():
            try:
                info = decode_record_info(buf, self.pos, end, check_crc)
            except RecordError as exc:
                self._ended(Stop.DAMAGED, self.pos, str(exc))
                return
            yield info
