"""MappedFileQueue: an append-only log made of equal-size segments in one directory.

Thread safety: the segment list is changed under ``lock`` (appends roll new segments on the
event loop; retention removes old ones on the housekeeping thread). Readers look a segment up
under the lock and then read it; a segment deleted meanwhile raises ValueError ("mmap closed"),
which readers treat as "already removed".
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from pocketmq.store.layout import is_offset_file_name, offset_file_name
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.reserve import ReservePolicy

log = logging.getLogger(__name__)


class MappedFileQueue:
    def __init__(
        self, directory: Path, file_size: int, min_zero_run: int, policy: ReservePolicy
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        # How far ahead of the write position each segment's blocks are reserved.
        self.policy = policy
        # Zero bytes in a row that prove the end of written data (see MappedFile.zero_from).
        self.min_zero_run = min_zero_run
        self.files: list[MappedFile] = []
        self.lock = threading.RLock()
        # Log offset up to which every byte is durable.
        self.flushed_where = 0
        # Counts truncate_dirty calls, so that a flush racing one does not raise flushed_where
        # to an end that was cut off.
        self.truncations = 0
        # The next segment, created ahead of time by the prefault thread (not yet in files).
        self._prepared: MappedFile | None = None
        # Held while a segment is being created, so the appender and the prefault thread never
        # create the same one twice.
        self._prepare_lock = threading.Lock()
        # The segment whose reserve-ahead failure was logged (once, not every round).
        self._reserve_warned: MappedFile | None = None
        # Whether the last append was a copy into the mapping, which the prefault thread then
        # keeps faulting pages in for; a large append is written with pwrite, which needs no
        # pages faulted in (see mapped_file.py). Set by the appender.
        self.prefaulting = True

    # --- lifecycle ------------------------------------------------------------------

    def load(self) -> None:
        """Map every segment in the directory, oldest first.

        Raises:
            ValueError: a segment has the wrong size or the names leave a gap.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(n for n in os.listdir(self.directory) if is_offset_file_name(n))
        for name in names:
            start = int(name)
            if start % self.file_size:
                raise ValueError(
                    f"{self.directory / name}: start offset is not a multiple of the "
                    f"configured segment size {self.file_size}"
                )
            if self.files and start != self.files[-1].file_end_offset:
                raise ValueError(
                    f"{self.directory}: segment {name} does not follow the previous one"
                )
            mf = MappedFile.open(self.directory / name, start, self.file_size, self.policy)
            # Until recovery says otherwise, a loaded segment counts as fully written.
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def close(self) -> None:
        with self.lock:
            for mf in self.files:
                mf.close()
            self.files.clear()
            if self._prepared is not None:
                # Never written: remove it so a reopened store sees no empty trailing segment.
                self._prepared.destroy()
                self._prepared = None

    # --- lookups --------------------------------------------------------------------

    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first else 0

    def max_offset(self) -> int:
        """Offset just past the last byte written."""
        last = self.last()
        return last.file_from_offset + last.wrote_position if last else 0

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding log offset ``offset``, or None if it is gone or not written."""
        with self.lock:
            files = self.files
            if not files:
                return None
            idx = (offset - files[0].file_from_offset) // self.file_size
            if 0 <= idx < len(files):
                return files[idx]
            return None

    # --- writing --------------------------------------------------------------------

    def last_for_write(self, start_offset_if_empty: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full.

        Raises:
            OSError: a new segment cannot be created.
        """
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full():
            return last
        start = last.file_end_offset if last is not None else start_offset_if_empty
        return self._create(start)

    def start_at(self, offset: int) -> None:
        """Make a log with nothing written begin at segment start ``offset`` (a replica whose
        master starts it there): empty segments are removed, the next append creates it.

        Raises:
            ValueError: a segment holds data, or offset is not a segment start.
        """
        if offset % self.file_size or self.max_offset():
            raise ValueError(f"cannot restart a log at {offset}")
        with self.lock:
            for mf in self.files:
                mf.destroy()
            self.files = []
            self.flushed_where = offset

    def _create(self, start: int) -> MappedFile:
        with self._prepare_lock:
            with self.lock:
                if self.files and self.files[-1].file_from_offset >= start:
                    return self.files[-1]
                prepared, self._prepared = self._prepared, None
            if prepared is not None and prepared.file_from_offset == start:
                mf = prepared
            else:
                if prepared is not None:
                    prepared.destroy()
                self.directory.mkdir(parents=True, exist_ok=True)
                path = self.directory / offset_file_name(start)
                mf = MappedFile.create(path, start, self.file_size, self.policy)
            with self.lock:
                self.files.append(mf)
        return mf

    def prepare_next(self, when_free_below: int) -> None:
        """Create the segment after the last one once the last has little room left.

        Runs on the prefault thread; a failure (disk full) is left for the append to meet.
        """
        last = self.last()
        if last is None or last.free_space >= when_free_below or self._prepared is not None:
            return
        with self._prepare_lock:
            if self._prepared is not None or self.last() is not last:
                return
            start = last.file_end_offset
            try:
                self._prepared = MappedFile.create(
                    self.directory / offset_file_name(start), start, self.file_size, self.policy
                )
                self._prepared.reserve(1)
            except OSError as exc:
                log.warning("cannot prepare the next segment: %s", exc)

    def reserve_ahead(self, window: int) -> None:
        """Reserve the last segment's next chunk before appends need it and say when to come
        back (MappedFile.reserve_ahead; prefault thread); a failure (disk full) is left for
        the append to meet."""
        last = self.last()
        if last is None:
            return
        try:
            last.reserve_ahead(window, self.prefaulting)
        except OSError as exc:
            # Appends stop waking the thread; the append that needs the space meets the error.
            last.wake_at = last.file_size
            if self._reserve_warned is not last:
                self._reserve_warned = last
                log.warning("cannot reserve ahead in %s: %s", last.path, exc)
        except ValueError:  # removed by retention or truncation meanwhile
            pass

    def being_written(self) -> list[MappedFile]:
        """The last segment and the one prepared to follow it, if any (prefault thread)."""
        last, prepared = self.last(), self._prepared
        return [mf for mf in (last, prepared) if mf is not None]

    def warm_ranges(self, window: int) -> list[tuple[MappedFile, int, int]]:
        """The byte ranges the next ``window`` bytes of appends will touch, within what is
        reserved (faulting in an unreserved page would allocate it behind the reservation);
        none while the appends are written with pwrite."""
        last = self.last()
        if last is None or not self.prefaulting:
            return []
        end = last.wrote_position + window
        ranges = [(last, last.wrote_position, min(end, last.reserved))]
        prepared = self._prepared
        if end > last.file_size and prepared is not None:
            ranges.append((prepared, 0, min(end - last.file_size, prepared.reserved)))
        return ranges

    # --- durability -----------------------------------------------------------------

    def flush(self) -> int:
        """fdatasync every segment with unflushed bytes; returns the new flushed offset.

        Each segment's sync covers what was written to it when the sync began, so the offset
        returned includes bytes appended while an earlier segment synced: a group commit
        releases every put the sync covered, not only those present when this call began."""
        with self.lock:
            files = list(self.files)
            truncations = self.truncations
        durable = self.flushed_where
        for mf in files:
            if mf.flushed_position < mf.wrote_position:
                try:
                    mf.flush()
                except ValueError:  # removed by retention meanwhile
                    continue
            durable = mf.file_from_offset + mf.flushed_position
        with self.lock:
            # A truncation meanwhile made durable stale: bytes appended up to it since are new.
            if truncations == self.truncations:
                self.flushed_where = max(self.flushed_where, durable)
            return self.flushed_where

    # --- recovery and retention -----------------------------------------------------

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at or after log offset ``offset``: later segments are deleted and the
        segment holding it is zeroed from there, so stale bytes can never be read as records.
        A segment prepared ahead that no longer follows the last one is deleted too: left
        behind, it would be a gap in the names at the next load."""
        # The prefault thread creates prepared segments under _prepare_lock (then self.lock).
        with self._prepare_lock, self.lock:
            self.truncations += 1
            keep: list[MappedFile] = []
            for mf in self.files:
                if mf.file_end_offset <= offset:
                    keep.append(mf)
                elif mf.file_from_offset <= offset:
                    pos = offset - mf.file_from_offset
                    if pos == 0 and mf is not self.files[0]:
                        mf.destroy()
                        continue
                    mf.zero_from(pos, self.min_zero_run)
                    mf.resume_at(pos)
                    keep.append(mf)
                else:
                    log.warning("deleting segment %s past the recovered end %d", mf.path, offset)
                    mf.destroy()
            self.files = keep
            self.flushed_where = min(self.flushed_where, offset) if self.flushed_where else offset
            prepared = self._prepared
            if prepared is not None and (
                not keep or prepared.file_from_offset != keep[-1].file_end_offset
            ):
                self._prepared = None
                prepared.destroy()

    def delete_first(self) -> MappedFile | None:
        """Remove the oldest segment from the queue and the disk (never the only one)."""
        with self.lock:
            if len(self.files) <= 1:
                return None
            mf = self.files.pop(0)
        mf.destroy()
        return mf

    def expired_candidates(self, reserved_ms: int, now_ms: int) -> list[MappedFile]:
        """Segments, oldest first, last written more than reserved_ms before now_ms (never the
        last)."""
        with self.lock:
            files = self.files[:-1]
        result = []
        for mf in files:
            try:
                mtime = int(os.stat(mf.path).st_mtime * 1000)
            except FileNotFoundError:
                continue
            if mtime + reserved_ms <= now_ms:
                result.append(mf)
            else:
                break
        return result
