"""RocketMQ 4.x's HA protocol (HAService / HAConnection / HAClient): the frames a master and
its slave exchange on the HA port. No I/O here: encoders return bytes, readers take whatever
a socket read returned and give back what is complete.

Slave -> master, a report (at connect, after applying frames, and as a heartbeat)::

    offset size  field
    0      8     max CommitLog offset of the slave (big-endian): everything before it is
                 stored there. The first report of a connection says where to start.

Master -> slave, a transfer frame::

    offset size  field
    0      8     phy offset: the CommitLog offset of the first body byte
    8      4     body size (0: a heartbeat, nothing to apply)
    12     size  CommitLog bytes, at most haTransferBatchSize, never past a segment's end

There is no other framing: a stream is reports back to back, or frames back to back.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from pocketmq.errors import RemoteProtocolError

REPORT: Final = struct.Struct(">q")
FRAME_HEADER: Final = struct.Struct(">qi")
# The largest body a reader takes: RocketMQ's HAClient reads into a 4 MiB buffer, so a
# master never sends more in one frame.
MAX_FRAME_BODY: Final = 4 * 1024 * 1024 - FRAME_HEADER.size


def encode_report(max_offset: int) -> bytes:
    """A slave's report of its max CommitLog offset.

    Raises:
        ValueError: the offset is negative.
    """
    if max_offset < 0:
        raise ValueError(f"a CommitLog offset is never negative, got {max_offset}")
    return REPORT.pack(max_offset)


def encode_frame_header(phy_offset: int, body_size: int) -> bytes:
    """The 12 bytes before a frame's body (``body_size`` 0: a heartbeat).

    Raises:
        ValueError: the offset is negative or the size outside 0..MAX_FRAME_BODY.
    """
    if phy_offset < 0 or not 0 <= body_size <= MAX_FRAME_BODY:
        raise ValueError(f"bad frame header: offset {phy_offset}, size {body_size}")
    return FRAME_HEADER.pack(phy_offset, body_size)


class ReportReader:
    """Reads a slave's reports as the master does: of the reports completed by one read only
    the last counts (a later report supersedes an earlier one), and a partial one waits."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> int | None:
        """The last report completed by ``data``, or None if it completes none.

        Raises:
            RemoteProtocolError: the report is negative.
        """
        buf = self._partial + data if self._partial else data
        whole = len(buf) - len(buf) % REPORT.size
        self._partial = bytes(buf[whole:])
        if not whole:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - REPORT.size)
        if offset < 0:
            raise RemoteProtocolError(f"the slave reported offset {offset}")
        return int(offset)


@dataclass(frozen=True, slots=True)
class Frame:
    """One transfer frame; ``body`` is empty for a heartbeat. It may be a view of the data
    fed to the reader: use it before feeding more."""

    phy_offset: int
    body: memoryview

    @property
    def end_offset(self) -> int:
        return self.phy_offset + len(self.body)


class FrameReader:
    """Splits the master's stream into frames. Frames wholly inside one read are views of it
    (no copy); only a frame cut by a read boundary is assembled in a buffer."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """The frames completed by ``data``, in order.

        Raises:
            RemoteProtocolError: a header with a negative offset or a size outside
                0..MAX_FRAME_BODY; the stream cannot be trusted after it.
        """
        frames: list[Frame] = []
        view = memoryview(data)
        pos = self._complete_buffered(view, frames)
        end = len(view)
        while end - pos >= _HEADER_SIZE:
            phy, size = _checked_header(view, pos)
            if end - pos - _HEADER_SIZE < size:
                break
            frames.append(Frame(phy, view[pos + _HEADER_SIZE : pos + _HEADER_SIZE + size]))
            pos += _HEADER_SIZE + size
        if pos < end:
            self._buf += view[pos:]
        return frames

    def _complete_buffered(self, view: memoryview, frames: list[Frame]) -> int:
        """Finish the frame cut by the previous read with the start of ``view``; returns
        how many bytes of ``view`` that took."""
        buf = self._buf
        if not buf:
            return 0
        pos = 0
        if len(buf) < _HEADER_SIZE:
            pos = min(_HEADER_SIZE - len(buf), len(view))
            buf += view[:pos]
            if len(buf) < _HEADER_SIZE:
                return pos
        phy, size = _checked_header(buf, 0)
        take = min(_HEADER_SIZE + size - len(buf), len(view) - pos)
        buf += view[pos : pos + take]
        pos += take
        if len(buf) == _HEADER_SIZE + size:
            # The body stays a view of this buffer, so the next frame gets a new one.
            frames.append(Frame(phy, memoryview(buf)[_HEADER_SIZE:]))
            self._buf = bytearray()
        return pos


_HEADER_SIZE: Final = FRAME_HEADER.size


def _checked_header(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    phy, size = FRAME_HEADER.unpack_from(buf, pos)
    if phy < 0 or not 0 <= size <= MAX_FRAME_BODY:
        raise RemoteProtocolError(f"bad HA frame header: offset {phy}, size {size}")
    return int(phy), int(size)
