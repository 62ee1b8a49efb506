"""Read-only decoding and verification of a store directory (``pocketmq store inspect``).

Works on the files alone, mapped read-only, without recovering or changing anything, so it can
check a store written by pocketmq or by RocketMQ. With ``verify`` it checks every record's
CRC and length, that every consume-queue unit points at the record it claims (same topic,
queue, queue offset, size and tag hash), that every record sits in its queue, and that every
index entry points at a record carrying the key it was hashed from.
"""

from __future__ import annotations

import bisect
import mmap
import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.protocol.properties import KEY_SEPARATOR
from pocketmq.protocol.record_codec import RecordInfo, decode_record_info
from pocketmq.protocol.records import RecordWalk, Stop
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import BLANK_UNIT
from pocketmq.store.dispatch import compute_tags_code, goes_to_consume_queue
from pocketmq.store.index_file import index_key_hash
from pocketmq.store.layout import (
    CONSUME_QUEUE_DIR,
    CQ_UNIT_SIZE,
    INDEX_DIR,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    commitlog_dir,
    is_offset_file_name,
)
from pocketmq.store.mapped_file import data_end

_MAX_PROBLEMS_KEPT = 200


@dataclass
class QueueSummary:
    records: int = 0
    bytes: int = 0
    min_queue_offset: int | None = None
    max_queue_offset: int | None = None
    cq_units: int = 0
    cq_min_offset: int | None = None
    cq_max_offset: int = 0  # one past the last unit


@dataclass
class Report:
    root: str
    commitlog_files: int = 0
    commitlog_min_offset: int = 0
    commitlog_max_offset: int = 0
    records: int = 0
    record_bytes: int = 0
    not_in_queue: int = 0  # prepared / rolled-back transaction records
    queues: dict[str, QueueSummary] = field(default_factory=dict)
    index_files: int = 0
    index_entries: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < _MAX_PROBLEMS_KEPT:
            self.problems.append(text)

    def queue(self, topic: str, queue_id: int) -> QueueSummary:
        return self.queues.setdefault(f"{topic}/{queue_id}", QueueSummary())


def _map_read_only(path: Path, data_from: int = 0) -> tuple[mmap.mmap, int] | None:
    """The file mapped, and where its data from ``data_from`` on ends: past that lie holes,
    which on a full tmpfs kill the reader with SIGBUS even through a read-only mapping
    (mapped_file.data_end)."""
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        return mm, data_end(f.fileno(), data_from, size)


def _head(path: Path, size: int = 8) -> bytes:
    with open(path, "rb") as f:
        return f.read(size)


def _segments(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    return sorted((int(n), directory / n) for n in os.listdir(directory) if is_offset_file_name(n))


class _Records:
    """The CommitLog's valid records: sorted offsets plus decoded info on demand."""

    def __init__(self) -> None:
        self.offsets = array("q")
        self.maps: list[tuple[int, int, mmap.mmap]] = []

    def info_at(self, phy: int) -> RecordInfo | None:
        i = bisect.bisect_left(self.offsets, phy)
        if i == len(self.offsets) or self.offsets[i] != phy:
            return None
        for start, size, mm in self.maps:
            if start <= phy < start + size:
                return decode_record_info(mm, phy - start, size, check_crc=False)
        return None


def _scan_commitlog(
    root: Path,
    verify: bool,
    report: Report,
    records: _Records,
    progress: Callable[[str, int, int], None] | None,
) -> Iterator[RecordInfo]:
    segments = _segments(commitlog_dir(root))
    report.commitlog_files = len(segments)
    if not segments:
        return
    total = sum(p.stat().st_size for _, p in segments)
    what = "verifying the commitlog" if verify else "reading the commitlog"
    done = 0
    report.commitlog_min_offset = segments[0][0]
    expected_start = segments[0][0]
    end_offset = segments[0][0]
    for idx, (start, path) in enumerate(segments):
        if start != expected_start:
            report.problem(
                f"commitlog {path.name}: expected a segment starting at {expected_start}"
            )
        mapped = _map_read_only(path)
        if mapped is None:
            report.problem(f"commitlog {path.name}: empty file")
            break
        mm, data = mapped
        size = len(mm)
        records.maps.append((start, size, mm))
        expected_start = start + size
        walk = RecordWalk(mm, 0, size, end=data, base_offset=start)
        for info in walk.records(check_crc=verify):
            records.offsets.append(start + walk.pos)
            yield info
        done += size
        if progress is not None:
            progress(f"{what} ({idx + 1}/{len(segments)} files)", done, total)
        pos = walk.pos
        stop = None
        if walk.stop is Stop.BLANK:
            if walk.size != size - pos:
                stop = f"blank record at {start + pos} has size {walk.size}, {size - pos} left"
            pos = size
        elif walk.stop is Stop.END_OF_DATA or (walk.stop is Stop.SHORT and data < size):
            stop = "end of data"
        elif walk.stop is Stop.DAMAGED:
            stop = f"record at {start + pos}: {walk.detail}"
        end_offset = start + pos
        if stop == "end of data":
            later = [
                p for _, p in segments[idx + 1 :] if p.stat().st_size >= 8 and _head(p) != bytes(8)
            ]
            if later:
                report.problem(
                    f"commitlog {path.name}: data ends at {end_offset} but {later[0].name} follows"
                )
            if any(mm[pos : min(data, pos + (1 << 20))]):
                report.problem(
                    f"commitlog {path.name}: non-zero bytes after the end of data at {end_offset}"
                )
            break
        if stop is not None:
            report.problem(f"commitlog {path.name}: {stop}")
            break
    report.commitlog_max_offset = end_offset


def _check_queues(
    root: Path, verify: bool, report: Report, records: _Records, levels: tuple[int, ...]
) -> None:
    base = root / CONSUME_QUEUE_DIR
    if not base.is_dir():
        return
    for topic_dir in sorted(base.iterdir()):
        for queue_dir in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
            if not queue_dir.name.isdigit():
                continue
            qid = int(queue_dir.name)
            summary = report.queue(topic_dir.name, qid)
            segments = _segments(queue_dir)
            for start, path in segments:
                mapped = _map_read_only(path)
                if mapped is None:
                    continue
                mm, data = mapped
                unit_no = start // CQ_UNIT_SIZE
                for pos in range(0, data - CQ_UNIT_SIZE + 1, CQ_UNIT_SIZE):
                    raw = mm[pos : pos + CQ_UNIT_SIZE]
                    phy = int.from_bytes(raw[:8], "big", signed=True)
                    size = int.from_bytes(raw[8:12], "big", signed=True)
                    if phy < 0 or size <= 0:
                        break
                    qo = unit_no + pos // CQ_UNIT_SIZE
                    summary.cq_units += 1
                    summary.cq_max_offset = qo + 1
                    if raw == BLANK_UNIT:
                        continue
                    if summary.cq_min_offset is None:
                        summary.cq_min_offset = qo
                    if not verify or phy < report.commitlog_min_offset:
                        continue
                    _verify_unit(
                        report,
                        records,
                        levels,
                        topic_dir.name,
                        qid,
                        qo,
                        phy,
                        size,
                        int.from_bytes(raw[12:], "big", signed=True),
                    )


def _verify_unit(
    report: Report,
    records: _Records,
    levels: tuple[int, ...],
    topic: str,
    qid: int,
    qo: int,
    phy: int,
    size: int,
    tags: int,
) -> None:
    where = f"consumequeue {topic}/{qid} unit {qo}"
    info = records.info_at(phy)
    if info is None:
        report.problem(f"{where}: no record starts at commitlog offset {phy}")
        return
    expected = (topic, qid, qo, size)
    actual = (info.topic, info.queue_id, info.queue_offset, info.size)
    if expected != actual:
        report.problem(f"{where}: points at a record of {actual}, expected {expected}")
    want_tags = compute_tags_code(info.topic, info.properties, info.store_timestamp, levels)
    if info.topic != SCHEDULE_TOPIC and tags != want_tags:
        report.problem(f"{where}: tag hash {tags}, the record's tags hash to {want_tags}")


def _check_index(
    root: Path, verify: bool, report: Report, records: _Records, cfg: StoreConfig
) -> None:
    directory = root / INDEX_DIR
    if not directory.is_dir():
        return
    for path in sorted(p for p in directory.iterdir() if p.name.isdigit()):
        slots = cfg.max_hash_slot_num
        base = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE
        mapped = _map_read_only(path, base + INDEX_ENTRY_SIZE)
        if mapped is None:
            continue
        mm, entries_end = mapped
        report.index_files += 1
        header = _head(path, INDEX_HEADER_SIZE)  # read, not mapped: it may be a hole
        begin_ts = int.from_bytes(header[0:8], "big", signed=True)
        count = int.from_bytes(header[36:40], "big", signed=True)
        entries = max(0, count - 1)
        report.index_entries += entries
        expected_size = (
            INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + cfg.max_index_num * INDEX_ENTRY_SIZE
        )
        if len(mm) != expected_size:
            report.problem(
                f"index {path.name}: {len(mm)} bytes, expected {expected_size} "
                f"for {slots} slots and {cfg.max_index_num} entries"
            )
            continue
        if not verify:
            continue
        for n in range(1, count):
            pos = base + n * INDEX_ENTRY_SIZE
            if pos + INDEX_ENTRY_SIZE > entries_end:
                where = f"index {path.name}"
                report.problem(f"{where}: the header counts {count - 1} entries, it holds {n - 1}")
                break
            key_hash = int.from_bytes(mm[pos : pos + 4], "big", signed=True)
            phy = int.from_bytes(mm[pos + 4 : pos + 12], "big", signed=True)
            diff = int.from_bytes(mm[pos + 12 : pos + 16], "big", signed=True)
            prev = int.from_bytes(mm[pos + 16 : pos + 20], "big", signed=True)
            where = f"index {path.name} entry {n}"
            if prev < 0 or prev >= n:
                report.problem(f"{where}: previous entry {prev} is not older")
            if phy < report.commitlog_min_offset:
                continue
            info = records.info_at(phy)
            if info is None:
                report.problem(f"{where}: no record starts at commitlog offset {phy}")
                continue
            keys = [k for k in (info.keys or "").split(KEY_SEPARATOR) if k]
            if info.uniq_key:
                keys.append(info.uniq_key)
            if key_hash not in {index_key_hash(f"{info.topic}#{k}") for k in keys}:
                report.problem(f"{where}: hash {key_hash} matches no key of the record at {phy}")
            if begin_ts > 0 and not (
                begin_ts + diff * 1000 <= info.store_timestamp < begin_ts + (diff + 1) * 1000
            ):
                report.problem(f"{where}: time {diff}s does not match the record's store time")


def inspect_store(
    root: Path,
    verify: bool = False,
    config: StoreConfig | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Report:
    """Decode (and optionally verify) the store at root without modifying it; progress, when
    given, hears (what, CommitLog bytes done, CommitLog bytes in all) after each segment."""
    cfg = config or StoreConfig(store_path_root_dir=root)
    report = Report(root=str(root))
    records = _Records()
    levels = cfg.delay_levels_ms
    in_queue: dict[tuple[str, int], dict[int, int]] = {}
    for info in _scan_commitlog(root, verify, report, records, progress):
        report.records += 1
        report.record_bytes += info.size
        if not goes_to_consume_queue(info.sys_flag):
            report.not_in_queue += 1
            continue
        q = report.queue(info.topic, info.queue_id)
        q.records += 1
        q.bytes += info.size
        q.min_queue_offset = (
            info.queue_offset
            if q.min_queue_offset is None
            else min(q.min_queue_offset, info.queue_offset)
        )
        q.max_queue_offset = (
            info.queue_offset
            if q.max_queue_offset is None
            else max(q.max_queue_offset, info.queue_offset)
        )
        if verify:
            in_queue.setdefault((info.topic, info.queue_id), {})[info.queue_offset] = (
                info.phy_offset
            )
    _check_queues(root, verify, report, records, levels)
    if verify:
        for (topic, qid), offsets in in_queue.items():
            q = report.queue(topic, qid)
            missing = [qo for qo in offsets if qo >= q.cq_max_offset]
            if missing:
                report.problem(
                    f"consumequeue {topic}/{qid}: {len(missing)} records are not in the "
                    f"queue (first queue offset {min(missing)})"
                )
    if cfg.message_index_enable:
        _check_index(root, verify, report, records, cfg)
    return report
