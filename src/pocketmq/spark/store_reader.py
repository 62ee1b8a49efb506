"""Scanning a store directory's CommitLog files for ``format("pocketmq-store")``.

Works on the files alone, mapped read-only: nothing is recovered or changed, so it reads a
store a broker is running on, a copy, or a RocketMQ store (the record format is the same).

Planning (driver): one range per segment file; a file larger than ``maxBytesPerPartition`` is
cut into ranges at record boundaries, found by hopping from one record's size field to the
next. Reading (executor): decode the records that start inside the range.

Where a file's data ends:
- a blank record (``TOTALSIZE | cbd43194``) closes a full segment;
- zeros (size 0, magic 0) follow the last record of the segment being written;
- a record that does not decode in the last segment is a torn tail (a write cut short by a
  crash): the scan stops there, as the broker's recovery does. In any earlier segment it is
  corruption: CorruptRecordError names the file and offset (failOnCorruption=false skips
  the rest of that file instead).
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
from pocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordError,
    decode_message,
    peek_record_size,
)
from pocketmq.spark.options import StoreReadOptions
from pocketmq.spark.rows import BATCH_ROWS, RowBuffer, inflate

log = logging.getLogger(__name__)

# store/layout.py's COMMITLOG_DIR; spark reads the format, it does not import the store.
COMMITLOG_DIR: Final = "commitlog"
MIN_RECORD_SIZE: Final = 91  # a v1 record with empty body, topic and properties


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


def _is_record_head(total: int, magic: int, left: int) -> bool:
    return magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) and MIN_RECORD_SIZE <= total <= left


def plan(opts: StoreReadOptions) -> list[FileRange]:
    """The ranges to read, in CommitLog order."""
    found = segments(opts.path)
    last_offset = found[-1][0]
    out: list[FileRange] = []
    for offset, path in found:
        size = path.stat().st_size
        is_last = offset == last_offset
        if size <= opts.max_bytes_per_partition:
            if size:
                out.append(FileRange(str(path), offset, 0, size, is_last))
            continue
        mm = _map(path)
        assert mm is not None
        try:
            lo = pos = 0
            while pos + 8 <= size:
                total, magic = peek_record_size(mm, pos)
                if not _is_record_head(total, magic, size - pos):
                    break  # end of data, blank record or damage: the reader tells which
                pos += total
                if pos - lo >= opts.max_bytes_per_partition:
                    out.append(FileRange(str(path), offset, lo, pos, is_last))
                    lo = pos
            if lo < size:
                # The rest, from the last cut to the file's end: it holds the end marker.
                out.append(FileRange(str(path), offset, lo, size, is_last))
        finally:
            mm.close()
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
    view = memoryview(mm)
    buf = RowBuffer(include_properties=opts.include_properties, store_columns=True)
    size = len(mm)
    pos = rng.lo
    try:
        while pos < rng.hi and pos + 8 <= size:
            total, magic = peek_record_size(mm, pos)
            if magic == BLANK_MAGIC_CODE or (total == 0 and magic == 0):
                break
            if not _is_record_head(total, magic, size - pos):
                _damage(rng, pos, f"no record header (size {total}, magic {magic:08x})", opts)
                break
            try:
                msg = decode_message(view[pos : pos + total])
                if msg.phy_offset != rng.file_offset + pos:
                    raise RecordError(f"the record says it is at offset {msg.phy_offset}")
                body = inflate(msg)
            except (RecordError, ValueError, zlib.error) as exc:
                _damage(rng, pos, str(exc), opts)
                break
            msg.msg_id = msg.uniq_key or msg.msg_id
            buf.add(msg, msg.topic, opts.broker, body)
            if len(buf) >= BATCH_ROWS:
                yield buf.flush()
            pos += total
        if len(buf):
            yield buf.flush()
    finally:
        view.release()
        mm.close()
