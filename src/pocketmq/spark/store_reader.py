"""Scanning a store directory's CommitLog files for ``format("pocketmq-store")``.

Works on the files alone, mapped read-only: nothing is recovered or changed, so it reads a
store a broker is running on, a copy, or a RocketMQ store (the record format is the same).

Planning (driver): one range per segment file; a file larger than ``maxBytesPerPartition`` is
cut into ranges at record boundaries, found by hopping from one record's size field to the
next. Reading (executor): decode the records that start inside the range.

Both walk a segment with pocketmq.protocol.records (which draws how a segment ends: a blank
record closing a full segment, zeros after the last record of the one being written); the
reader decodes each record straight into Arrow columns (spark/rows.py). A record that does not
decode in the last segment is a torn tail (a write cut short by a crash): the scan stops there,
as the broker's recovery does. In any earlier segment it is corruption: CorruptRecordError
names the file and offset (failOnCorruption=false skips the rest of that file instead).
"""

from __future__ import annotations

import logging
import mmap
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa  # type: ignore[import-untyped]

from pocketmq.errors import ConfigError, CorruptRecordError
from pocketmq.protocol.record_codec import RecordError
from pocketmq.protocol.records import RecordWalk, Stop
from pocketmq.spark.options import StoreReadOptions
from pocketmq.spark.rows import BATCH_ROWS, RowBuffer

log = logging.getLogger(__name__)

# store/layout.py's COMMITLOG_DIR; spark reads the format, it does not import the store.
COMMITLOG_DIR: Final = "commitlog"
# minPartitions cuts no range below this: a task costs more than reading a few megabytes.
MIN_SPLIT_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class FileRange:
    """Records starting at byte positions [lo, hi) of one segment. Pickled to executors."""

    path: str
    file_offset: int  # the segment's first CommitLog offset (its name)
    lo: int
    hi: int
    last_segment: bool  # a bad record here is a torn tail, not corruption

    def __str__(self) -> str:
        return f"{self.path} [{self.lo}, {self.hi})"


def segments(directory: str) -> list[tuple[int, Path]]:
    """The CommitLog segments under a store root or in a commitlog directory, by offset.

    Raises:
        ConfigError: the directory does not exist or holds no segment.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"pocketmq-store: {directory} is not a directory")
    for candidate in (root / COMMITLOG_DIR, root):
        if candidate.is_dir():
            found = sorted(
                (int(n), candidate / n)
                for n in os.listdir(candidate)
                if len(n) == 20 and n.isdigit()
            )
            if found:
                return found
    raise ConfigError(
        f"pocketmq-store: no CommitLog segment in {directory}: expected "
        f"{directory}/commitlog/00000000000000000000 (a store root) or "
        f"{directory}/00000000000000000000 (a commitlog directory)"
    )


def _map(path: Path) -> mmap.mmap | None:
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


def _hop(mm: mmap.mmap) -> Iterator[int]:
    """The positions after each record, up to where the data ends (or stops making sense:
    end of data, a blank record or damage, which the reader tells apart)."""
    walk = RecordWalk(mm)
    for total in walk.sizes():
        yield walk.pos + total


def _cut(path: Path, offset: int, is_last: bool, target: int) -> list[FileRange]:
    size = path.stat().st_size
    if size <= target:
        return [FileRange(str(path), offset, 0, size, is_last)] if size else []
    mm = _map(path)
    assert mm is not None
    out = []
    try:
        lo = 0
        for pos in _hop(mm):
            if pos - lo >= target:
                out.append(FileRange(str(path), offset, lo, pos, is_last))
                lo = pos
    finally:
        mm.close()
    # The rest, from the last cut to the file's end: it holds the end marker.
    out.append(FileRange(str(path), offset, lo, size, is_last))
    return out


def _data_bytes(path: Path) -> int:
    mm = _map(path)
    if mm is None:
        return 0
    try:
        return max(_hop(mm), default=0)
    finally:
        mm.close()


def plan(opts: StoreReadOptions) -> list[FileRange]:
    """The ranges to read, in CommitLog order: at most maxBytesPerPartition each, and smaller
    when minPartitions asks for more ranges than that gives."""
    found = segments(opts.path)
    last_offset = found[-1][0]
    target = opts.max_bytes_per_partition
    if opts.min_partitions:
        total = sum(_data_bytes(path) for _, path in found)
        target = max(MIN_SPLIT_BYTES, min(target, -(-total // opts.min_partitions)))
    out: list[FileRange] = []
    for offset, path in found:
        out += _cut(path, offset, offset == last_offset, target)
    return out


def _damage(rng: FileRange, pos: int, detail: str, opts: StoreReadOptions) -> None:
    """A record that does not decode: the torn tail of the last segment is skipped quietly."""
    if rng.last_segment:
        log.info("%s: torn tail at %d (%s), the data ends there", rng.path, pos, detail)
        return
    if opts.fail_on_corruption:
        raise CorruptRecordError(
            rng.path,
            rng.file_offset + pos,
            f"{detail}; set option failOnCorruption=false to skip the rest of this file",
        )
    log.warning("%s: corrupt record at %d (%s), rest of file skipped", rng.path, pos, detail)


def read_file_range(rng: FileRange, opts: StoreReadOptions) -> Iterator[pa.RecordBatch]:
    """The rows of the records starting in the range (the body of DataSourceReader.read).

    Raises:
        CorruptRecordError: a record outside the last segment does not decode.
    """
    mm = _map(Path(rng.path))
    if mm is None:
        return
    buf = RowBuffer(include_properties=opts.include_properties, store_columns=True)
    # A memoryview, which the native add_record reads (the mapping must outlive it).
    view = memoryview(mm)
    walk = RecordWalk(view, rng.lo, rng.hi, base_offset=rng.file_offset)
    rows = 0  # in buf: counted here, the loop's only Python work besides the walk
    try:
        for _ in walk.sizes():
            try:
                buf.add_record(view, walk.pos, walk.end, None, opts.broker)
            except (RecordError, ValueError, zlib.error) as exc:  # nothing was added
                _damage(rng, walk.pos, str(exc), opts)
                break
            rows += 1
            if rows == BATCH_ROWS:
                yield buf.flush()
                rows = 0
        else:
            if walk.stop is Stop.DAMAGED:
                _damage(rng, walk.pos, walk.detail, opts)
        if rows:
            yield buf.flush()
    finally:
        view.release()
        mm.close()
