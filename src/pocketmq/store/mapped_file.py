"""MappedFile: one fixed-size, memory-mapped segment of a log, reserved as it is written.

A segment is created sparse at its full size (ftruncate), so offsets and the format are
unchanged, and its blocks are reserved with posix_fallocate a chunk ahead of the write
position (see store/reserve.py). A write into an unreserved page of a mapping on a full disk
kills the process with SIGBUS; every writer therefore checks ``end > mf.reserved`` (one integer
comparison) and calls ``reserve(end)`` first, which reserves the next chunk or raises a clean
OSError (ENOSPC, EDQUOT) before any byte is written. Reading a hole gives zeros on a disk
file system, but on tmpfs it allocates the page, and on a full one kills the process with
SIGBUS too: readers of bytes that may never have been written (recovery's scans, an index's
slots) read only below ``data_end``, the first hole.

Small appends are memory copies into the mapping; large ones (a batch, or a replicated chunk)
are written with pwrite(2) (``write``) and read through the mapping, which sees the same
page-cache pages. A page of a reserved, never written block is faulted in zeroed, so a copy into
the mapping makes the kernel write every byte twice, the zeros on the prefault thread (see
prefault.py): measured as a quarter of the broker's CPU under batched sends. A pwrite of whole
pages fills new pages without zeroing them, but costs a system call (~1.3 us here) that a small
copy into a prefaulted page does not (BENCHMARKS.md, "Large appends through pwrite").
``flush`` calls fdatasync on the file descriptor, which writes back dirty pages however they
were dirtied, and releases the GIL while it waits.

The part of a mapping that is written from now on is advised MADV_RANDOM (``expect_writes``: a
new file whole, a reopened log from where recovery resumes it, ``resume_at``; a reopened index
file whole):
without it, the first fault on a page that is not in the page cache also reads around it, up to
the device's read_ahead_kb (8 MiB on this VM's disk), so faulting in one page of a fresh segment
allocates and zero-fills megabytes at once: 18 ms of CPU in one system call every few MiB of
appends, and the kernel here (preempt=none) gives that CPU to nobody meanwhile, not even a
consumer woken on it (BENCHMARKS.md, "W4's tail: fault read-around"). A page faulted in alone
costs more than one of a read-around batch (about 4 against 1.2 us here, mostly on the prefault
thread): the price of never holding a CPU that long. The rest of a reopened file keeps the
default read-ahead, which cold sequential reads (consumers catching up after a restart) need.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading
from pathlib import Path

from pocketmq.clock import SYSTEM_CLOCK
from pocketmq.store.reserve import ReservePolicy, align_down, align_up

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024


def mapping_address(mm: mmap.mmap) -> int:
    """Base address of a mapping (the temporary buffer export is released at once)."""
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view


def data_end(fd: int, pos: int, size: int) -> int:
    """Where the data of a file of ``size`` bytes from ``pos`` on ends: the first hole at or
    after it (pos if it is in one), ``size`` if there is none. The bytes below it are allocated
    and read through a mapping without a fault that could need space. Written bytes are never
    in a hole (reserved ones never written may be: ext4 reports its unwritten extents as
    holes), so what lies past it was never written: zeros."""
    try:
        return min(os.lseek(fd, pos, os.SEEK_HOLE), size)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # pos at or past the end of the file
            return pos
        raise


class MappedFile:
    """A segment named by the log offset of its first byte."""

    __slots__ = (
        "_chunk",
        "_fd",
        "_reserve_lock",
        "_reserved_at",
        "address",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "huge",
        "mm",
        "path",
        "policy",
        "prefaulted",
        "random_from",
        "reserved",
        "store_timestamp",
        "wake_at",
        "wrote_position",
    )

    def __init__(
        self,
        path: Path,
        file_from_offset: int,
        file_size: int,
        fd: int,
        policy: ReservePolicy,
    ) -> None:
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
        # Every byte in [floor, reserved) has its blocks reserved, where floor is 0 for logs
        # (an index file reserves its header and slot table itself, below its entries). A new
        # object knows of no reservation: a reopened file is reserved again as it is written,
        # which costs nothing for blocks already allocated.
        self.reserved = 0
        self.policy = policy
        self._chunk = 0
        self._reserved_at = 0.0
        # The appender and the prefault thread may both reserve ahead.
        self._reserve_lock = threading.Lock()
        # The write position at which the prefault thread has work again (see reserve_ahead).
        self.wake_at = 0
        # Where the mapping is advised MADV_RANDOM from (expect_writes); file_size: nowhere.
        self.random_from = file_size
        # Advised to be faulted in as huge folios (prefault.fault_in_as; folios.py).
        self.huge = False

    @classmethod
    def create(
        cls, path: Path, file_from_offset: int, file_size: int, policy: ReservePolicy
    ) -> MappedFile:
        """Create a new sparse segment of file_size bytes (no block reserved yet).

        Raises:
            OSError: the file cannot be created at that size (ENOSPC, EFBIG); nothing is left
                behind.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, file_size)
            mf = cls(path, file_from_offset, file_size, fd, policy)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        mf.expect_writes(0)
        return mf

    @classmethod
    def open(
        cls, path: Path, file_from_offset: int, file_size: int, policy: ReservePolicy
    ) -> MappedFile:
        """Map an existing segment; a short one (a torn copy or truncation) is extended
        (sparse: its new tail is reserved when it is written).

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
                os.ftruncate(fd, file_size)
            return cls(path, file_from_offset, file_size, fd, policy)
        except BaseException:
            os.close(fd)
            raise

    def resume_at(self, pos: int) -> None:
        """Continue this segment at ``pos`` (recovery, a truncation): everything before it is
        written and durable, and what follows is written from now on (``expect_writes``)."""
        self.wrote_position = self.flushed_position = pos
        self.expect_writes(pos)

    def expect_writes(self, pos: int) -> None:
        """Advise the kernel that the mapping from ``pos`` on is written, page by page, rather
        than read in sequence (MADV_RANDOM: a fault reads no pages around its own; see the
        module docstring). Advice only: a kernel that refuses it changes nothing else."""
        start = align_down(pos)
        if start >= self.random_from or self.mm.closed:
            return
        try:
            self.mm.madvise(mmap.MADV_RANDOM, start, self.random_from - start)
        except (OSError, ValueError) as exc:  # ValueError: unmapped meanwhile (a deleted file)
            log.debug("madvise(MADV_RANDOM) of %s refused: %s", self.path, exc)
            return
        self.random_from = start

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def free_space(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def data_end(self, pos: int = 0) -> int:
        """Where the file's data from ``pos`` on ends (see ``data_end``).

        Raises:
            ValueError: the file is closed (removed by retention meanwhile), as its mapping
                raises then.
        """
        if self._fd < 0:
            raise ValueError(f"{self.path} is closed")
        return data_end(self._fd, pos, self.file_size)

    def reserve(self, end: int) -> None:
        """Reserve blocks from the mark up to at least ``end``, a chunk ahead (the slow path of
        the writers' ``end > mf.reserved`` check).

        Raises:
            OSError: the blocks cannot be reserved (ENOSPC, EDQUOT); the mark is unchanged.
        """
        with self._reserve_lock:
            if end <= self.reserved:
                return
            now = SYSTEM_CLOCK.monotonic()
            chunk = self.policy.next_chunk(self._chunk, now - self._reserved_at)
            stop = self.policy.reserve_end(self.reserved, end, chunk, self.file_size)
            start = align_down(self.reserved)
            os.posix_fallocate(self._fd, start, stop - start)
            self.reserved = stop
            self._chunk = chunk
            self._reserved_at = now

    def reserve_ahead(self, window: int, prefaulting: bool) -> None:
        """Reserve the next chunk once less than half a chunk is left reserved ahead of the
        write position (the prefault thread, so that appends rarely reserve themselves), then
        set ``wake_at``: where the writer should wake the thread again, because the
        reservation runs low, or the prefault mark (``window`` ahead at most, never past the
        reservation) does, or, while the appends are not prefaulted (written with pwrite),
        they have gone half a window further (the thread keeps the index's pages ahead of
        them meanwhile). Appends compare one integer with it.

        Raises:
            OSError: the blocks cannot be reserved.
        """
        room = max(self._chunk, self.policy.min_chunk) // 2
        size = self.file_size
        if self.reserved < size and self.reserved - self.wrote_position < room:
            self.reserve(min(self.wrote_position + room, size))
        reserve_at = self.reserved - room if self.reserved < size else size
        if not prefaulting:
            prefault_at = self.wrote_position + window // 2
        elif self.prefaulted < self.reserved:
            prefault_at = self.prefaulted - window // 2
        else:
            prefault_at = size
        self.wake_at = min(reserve_at, prefault_at)

    def write(self, pos: int, data: memoryview) -> None:
        """Write ``data`` at file position ``pos`` with pwrite(2) (large appends; see the
        module docstring). The caller reserves the blocks first.

        Raises:
            OSError: the write failed (EIO); some of the bytes may be in the file.
        """
        n = os.pwrite(self._fd, data, pos)
        while n < len(data):  # a regular file takes a whole write unless it fails part way
            if n <= 0:
                raise OSError(errno.EIO, f"pwrite of {len(data)} bytes at {pos} wrote nothing")
            data, pos = data[n:], pos + n
            n = os.pwrite(self._fd, data, pos)

    def reserve_range(self, start: int, end: int) -> None:
        """Reserve the pages covering [start, end), leaving the mark alone (for files written
        at random places, such as an index file's slot table).

        Raises:
            OSError: the blocks cannot be reserved.
        """
        lo = align_down(start)
        hi = min(align_up(end), self.file_size)
        if hi > lo:
            os.posix_fallocate(self._fd, lo, hi - lo)

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

    def drop_cached(self, start: int, end: int) -> None:
        """Write back the page-cache pages of [start, end) and drop them, so that the next
        access faults them in anew, under the mapping's advice then (folios.py). Nothing is
        lost: unmapping a shared file's pages leaves their bytes in the page cache, the sync
        writes them, and the kernel drops no page that is dirty or mapped again meanwhile (a
        write that came in between). ``start`` on a page boundary.

        Raises:
            OSError: the sync failed; ValueError: the file is closed.
        """
        end = min(end, self.file_size)
        if end <= start:
            return
        self.mm.madvise(mmap.MADV_DONTNEED, start, end - start)
        os.fdatasync(self._fd)
        os.posix_fadvise(self._fd, start, end - start, os.POSIX_FADV_DONTNEED)

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
        data_end = self.data_end(pos)
        while pos < self.file_size and zero_run < min_zero_run:
            if pos >= data_end:  # a hole: zeros, and not to be read (see data_end)
                try:
                    data_at = os.lseek(self._fd, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno != errno.ENXIO:
                        raise
                    return  # no data after it
                zero_run += data_at - pos
                pos = data_at
                data_end = self.data_end(pos)
                continue
            end = min(pos + _CHUNK, data_end)
            chunk = mm[pos:end]
            if chunk.count(0) == len(chunk):
                zero_run += len(chunk)
            else:
                self.reserve_range(pos, end)
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
