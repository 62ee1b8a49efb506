"""RemotingConnection: the sans-IO side of one remoting connection. No I/O here.

Bytes go in with ``receive_data``; ``next_command`` returns decoded commands one at a time, or
``NEED_DATA``. ``send`` turns a command into bytes for the transport. Requests get fresh
``opaque`` values from ``next_opaque``. A frame that breaks the protocol (a negative or absurd
length, a malformed header) raises RemoteProtocolError; after that the stream cannot be
resynchronized and the connection is dead: every later call raises again.
"""

from __future__ import annotations

import enum
import itertools
from typing import Final

from pocketmq.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.protocol import native
from pocketmq.protocol.remoting import (
    DEFAULT_MAX_FRAME,
    RemotingCommand,
    decode_frame,
    encode_frame_head,
)


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = _Sentinel.NEED_DATA

# A request also needs its header length and a header: nothing smaller is a frame.
_MIN_FRAME = 4


def next_frame_py(buf: bytearray, pos: int, max_frame: int) -> tuple[RemotingCommand, int] | None:
    """The command of the frame at ``buf[pos:]`` and where the frame after it starts, or None
    while the frame is incomplete.

    Raises:
        RemoteProtocolError: the frame's length is outside 4..max_frame, or it is malformed.
    """
    if len(buf) - pos < 4:
        return None
    length = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    if length < _MIN_FRAME or length > max_frame:
        raise RemoteProtocolError(f"frame length {length} is outside 4..{max_frame} bytes")
    end = pos + 4 + length
    if len(buf) < end:
        return None
    # decode_frame copies what it keeps. Both views are released explicitly: a frame object
    # kept alive by a traceback (a warning raised while decoding) would otherwise pin the
    # buffer and every later resize would fail (BufferError).
    with memoryview(buf) as view, view[pos + 4 : end] as frame:
        return decode_frame(frame), end


# Every frame either side receives: the extension reads the length prefix and the frame in
# place, without the slice and views above (they cost as much as the header's decode).
next_frame: Final = native.select("next_frame", next_frame_py)


class RemotingConnection:
    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        # Where the next frame starts in _buffer: frames are decoded in place and the consumed
        # prefix is dropped once per receive_data, not once per frame (a memmove of whatever
        # follows each frame made a chunk of many frames quadratic).
        self._pos = 0
        self._error: RemoteProtocolError | None = None
        self._opaques = itertools.count(1)

    def next_opaque(self) -> int:
        # Java ints wrap; keep opaques positive 31-bit so every peer parses them.
        return next(self._opaques) & 0x7FFFFFFF

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0
        self._buffer += data

    def next_command(self) -> RemotingCommand | _Sentinel:
        """The next complete command, or NEED_DATA.

        Raises:
            RemoteProtocolError: the peer broke the protocol (sticky).
        """
        if self._error is not None:
            raise self._error
        buf = self._buffer
        try:
            found = next_frame(buf, self._pos, self.max_frame)
        except RemoteProtocolError as exc:
            self._error = exc
            raise
        if found is None:
            return NEED_DATA
        cmd, end = found
        if end == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
        return cmd

    def send(self, cmd: RemotingCommand) -> bytes:
        """Bytes to write for cmd.

        Raises:
            LocalProtocolError: cmd cannot be encoded or is larger than max_frame.
        """
        return b"".join(self.send_parts(cmd))

    def send_parts(self, cmd: RemotingCommand) -> tuple[bytes, bytes]:
        """The bytes to write for cmd as (length prefix and header, body), for a vectored write:
        the body is never copied into one buffer with its header.

        Raises:
            LocalProtocolError: cmd cannot be encoded or is larger than max_frame.
        """
        head, body = encode_frame_head(cmd), cmd.body
        if len(head) + len(body) - 4 > self.max_frame:
            raise LocalProtocolError(
                f"frame of {len(head) + len(body)} bytes exceeds {self.max_frame}"
            )
        return head, body
