"""MappedFile: one fixed-size, preallocated, memory-mapped segment of a log.

Segments are reserved with posix_fallocate before they are mapped. A write into a sparse
mapping on a full disk kills the process with SIGBUS; with the blocks reserved up front, a full
disk shows up as a clean OSError when the segment is created, and no write can fail later.

Appends are memory copies into the mapping; ``flush`` calls fdatasync on the file descriptor,
which writes back pages dirtied through the mapping and releases the GIL while it waits.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
from pathlib import Path

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024


def mapping_address(mm: mmap.mmap) -> int:
    """Base address of a mapping (the temporary buffer export is released at once)."""
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view


class MappedFile:
    """A segment named by the log offset of its first byte."""

    __slots__ = (
        "_fd",
        "address",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "mm",
        "path",
        "prefaulted",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(self, path: Path, file_from_offset: int, file_size: int, fd: int) -> None:
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self._fd = fd
        self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        # Base address for madvise, and how far pages are known to be faulted in.
        self.address = mapping_address(self.mm)
        self.prefaulted = 0
        self.wrote_position = 0
        self.flushed_position = 0
        # Store timestamp of the last record appended; feeds the checkpoint after a flush.
        self.store_timestamp = 0

    @classmethod
    def create(cls, path: Path, file_from_offset: int, file_size: int) -> MappedFile:
        """Create and reserve a new segment.

        Raises:
            OSError: the blocks cannot be reserved (ENOSPC, EFBIG, EDQUOT); nothing is left
                behind.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, file_size)
            return cls(path, file_from_offset, file_size, fd)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise

    @classmethod
    def open(cls, path: Path, file_from_offset: int, file_size: int) -> MappedFile:
        """Map an existing segment; a short one (a torn copy or truncation) is extended.

        Raises:
            OSError: the file cannot be opened or extended.
            ValueError: the file is larger than file_size (a different segment size).
        """
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual > file_size:
                raise ValueError(
                    f"{path} is {actual} bytes but segments are configured as {file_size}"
                )
            if actual < file_size:
                log.warning("%s is %d bytes, short of %d: extending", path, actual, file_size)
                os.posix_fallocate(fd, 0, file_size)
            return cls(path, file_from_offset, file_size, fd)
        except BaseException:
            os.close(fd)
            raise

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def free_space(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def flush(self) -> int:
        """Make everything written so far durable; returns the new flushed position."""
        target = self.wrote_position
        if target > self.flushed_position:
            os.fdatasync(self._fd)
            self.flushed_position = target
        return self.flushed_position

    def sync(self) -> None:
        """fdatasync regardless of positions (for files written at random places)."""
        os.fdatasync(self._fd)

    def read(self, pos: int, size: int) -> bytes:
        """Copy size bytes at file position pos (the copy stays valid after the file goes)."""
        return self.mm[pos : pos + size]

    def zero_from(self, pos: int, min_zero_run: int) -> None:
        """Zero stale bytes from pos on, stopping once min_zero_run zero bytes follow.

        Logs are written without gaps and every record carries non-zero bytes at least every
        ``min_zero_run`` bytes, so that many zeros in a row mark the end of old data. This keeps
        a later crash from exposing records that recovery already cut off, without rewriting
        (and dirtying) a whole preallocated segment on every start.
        """
        mm = self.mm
        zero_run = 0
        while pos < self.file_size and zero_run < min_zero_run:
            end = min(pos + _CHUNK, self.file_size)
            chunk = mm[pos:end]
            if chunk.count(0) == len(chunk):
                zero_run += len(chunk)
            else:
                mm[pos:end] = bytes(len(chunk))
                zero_run = 0
            pos = end

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"
