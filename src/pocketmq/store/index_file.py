"""Index files: a hash table on disk from ``topic#key`` to CommitLog offsets, by time.

    header (40)  begin timestamp (8) | end timestamp (8) | begin phy offset (8) |
                 end phy offset (8) | hash slot count (4) | index count (4)
    slots        max_hash_slot_num x 4 bytes: the newest entry number for the slot, 0 = empty
    entries      max_index_num x 20 bytes: key hash (4) | phy offset (8) |
                 seconds since begin timestamp (4) | previous entry number in the slot (4)

Entry numbers start at 1 (entry 0 is never used), as in RocketMQ's IndexFile. The key hash is
abs(String.hashCode) (0 for Integer.MIN_VALUE) and the slot is hash % slots. Hash collisions are
chained; callers compare the keys of the records found.

Index files are sparse: the header page is reserved when a file is mapped, entries a chunk
ahead of the next one (the MappedFile's mark, floored at the entries' start), and slot-table
pages as they are first written, until an eighth of them are, then the whole table
(store/reserve.py).

We also advance the header's end phy offset for records without keys, so that it says how far
the index has seen the CommitLog; restart re-dispatches from there.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Sequence
from pathlib import Path

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.native import IMPLEMENTATION
from pocketmq.protocol.properties import java_string_hash
from pocketmq.store.index_insert import (
    HEADER,
    IndexedRecord,
    index_put_requests,
    key_hashes,
    write_end_phy,
    write_header,
    write_slot,
)
from pocketmq.store.layout import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    index_file_name,
)
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.reserve import (
    INDEX_ENTRIES_RESERVE,
    RESERVE_ALIGN,
    SLOT_TABLE_WHOLE_AFTER,
    align_down,
)

log = logging.getLogger(__name__)

# The IndexHeader fields, in their order on disk (IndexFile's attributes of the same names).
_HEADER_FIELDS = (
    "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
    "hash_slot_count", "index_count",
)  # fmt: skip
# Whether build_index_batch goes through index_put_requests: the pure-Python reference of it
# (kept byte-identical by tests/unit/store/test_native_index.py) costs more per put than
# build_index record by record, whose bytes it reproduces.
_INSERT_IN_ONE_CALL = IMPLEMENTATION == "native"
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")


def index_key_hash(key: str) -> int:
    h = java_string_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


class IndexFile:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int

    def __init__(
        self, mf: MappedFile, slot_num: int, index_num: int, *, created: bool = False
    ) -> None:
        """An index file over ``mf``; ``created``: one just made, all zeros.

        Raises:
            OSError: its header's page cannot be reserved.
        """
        self.mf = mf
        self.slot_num = slot_num
        self.index_num = index_num
        # Before the header is read: on tmpfs a read of a hole in a shared mapping allocates
        # the page, and on a full one that kills the process with SIGBUS.
        mf.reserve_range(0, INDEX_HEADER_SIZE)
        self._read_header()
        self._entries_start = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
        # The mark covers entries only; the pages below are tracked here, one flag a page.
        mf.reserved = max(mf.reserved, align_down(self._entries_start))
        self._slot_pages = bytearray(self._entries_start // RESERVE_ALIGN + 1)
        self._slot_pages_left = len(self._slot_pages) // SLOT_TABLE_WHOLE_AFTER
        self.dirty = False
        if not created:  # a new file has no insert to undo, nor a page to read for one
            self._undo_torn_insert()

    def _undo_torn_insert(self) -> None:
        """Undo inserts the header does not count. put_key writes the entry, then the slot,
        then the header, so a crash in between leaves entry number index_count written (and
        maybe its slot pointing at it); left alone, re-adding a key of that slot would chain
        the new entry to itself. Newest first, each such entry is its slot's head."""
        count = self.index_count
        mm = self.mf.mm
        end = count
        # An entry reaching into a hole was never written (nor is the hole read: data_end).
        data_end = self.mf.data_end(self._entries_start + count * INDEX_ENTRY_SIZE)
        while end < self.index_num:
            pos = self._entries_start + end * INDEX_ENTRY_SIZE
            if pos + INDEX_ENTRY_SIZE > data_end or not any(mm[pos : pos + INDEX_ENTRY_SIZE]):
                break
            end += 1
        if end > count:
            self._reserve_entries(self._entries_start + end * INDEX_ENTRY_SIZE)
        for n in range(end - 1, count - 1, -1):
            pos = self._entries_start + n * INDEX_ENTRY_SIZE
            key_hash, _, _, prev = _ENTRY.unpack_from(mm, pos)
            slot_pos = INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE
            if self._read_slot(slot_pos) == n:
                self._reserve_slot_page(slot_pos)
                write_slot(mm, slot_pos, prev if 0 < prev < n else 0)
            mm[pos : pos + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
        if end > count:
            self.dirty = True
            log.warning(
                "index %s: undid %d inserts cut short from entry %d", self.name, end - count, count
            )

    def _read_slot(self, slot_pos: int) -> int:
        """A slot's entry number for a reader: on a page this file has not reserved, which
        may be a hole never written, only if data is there (MappedFile.data_end), else 0."""
        mf = self.mf
        if not self._slot_pages[slot_pos // RESERVE_ALIGN] and (
            mf.data_end(slot_pos) < slot_pos + INDEX_SLOT_SIZE
        ):
            return 0
        return int(_SLOT.unpack_from(mf.mm, slot_pos)[0])

    def _read_header(self) -> None:
        for name, value in zip(_HEADER_FIELDS, HEADER.unpack_from(self.mf.mm, 0), strict=True):
            setattr(self, name, value)
        if self.index_count <= 0:
            self.index_count = 1

    def put_requests(self, reqs: Sequence[IndexedRecord], start: int) -> int:
        """Insert the keys of reqs[start:] while they need no reservation (index_insert.py);
        returns the position of the first record left to build_index."""
        mf = self.mf
        done = index_put_requests(
            mf.mm, self._slot_pages, mf.reserved, self.slot_num, self.index_num, reqs, start
        )
        if done > start:
            # Spelled out, not through _read_header: this runs on every put.
            (
                self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                self.end_phy_offset, self.hash_slot_count, count,
            ) = HEADER.unpack_from(mf.mm, 0)  # fmt: skip
            self.index_count = max(count, 1)
            self.dirty = True
        return done

    def _reserve_entries(self, end: int) -> None:
        mf = self.mf
        if end > mf.reserved:
            mf.reserve(end)

    def _reserve_slot_page(self, slot_pos: int) -> None:
        """Reserve the page of a slot about to be written (callers check its flag first)."""
        page = slot_pos // RESERVE_ALIGN
        if self._slot_pages[page]:
            return
        if self._slot_pages_left > 0:
            self.mf.reserve_range(slot_pos, slot_pos + INDEX_SLOT_SIZE)
            self._slot_pages[page] = 1
            self._slot_pages_left -= 1
            return
        self.mf.reserve_range(0, self._entries_start)
        self._slot_pages = bytearray(b"\x01") * len(self._slot_pages)
        self._slot_pages_left = -1

    def slots_reserved(self) -> bool:
        """Whether the whole slot table is reserved (it may then be prefaulted)."""
        return self._slot_pages_left < 0

    @staticmethod
    def file_size(slot_num: int, index_num: int) -> int:
        return INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE

    @property
    def name(self) -> str:
        return self.mf.path.name

    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def _write_header(self) -> None:
        self.dirty = True
        # Spelled out, not through _HEADER_FIELDS: this runs on every key inserted.
        write_header(
            self.mf.mm,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add an entry for a key whose index_key_hash is key_hash; False when full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        mf = self.mf
        mm = mf.mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE
        entry_pos = self._entries_start + count * INDEX_ENTRY_SIZE
        # Reserve before writing (see mapped_file.py): one comparison and one flag test.
        if entry_pos + INDEX_ENTRY_SIZE > mf.reserved:
            mf.reserve(entry_pos + INDEX_ENTRY_SIZE)
        if not self._slot_pages[slot_pos // RESERVE_ALIGN]:
            self._reserve_slot_page(slot_pos)
        slot_value = _SLOT.unpack_from(mm, slot_pos)[0]
        if slot_value <= 0 or slot_value >= count:
            slot_value = 0
        begin = self.begin_timestamp
        time_diff = 0 if begin <= 0 else min(max((store_timestamp - begin) // 1000, 0), 2147483647)
        mm[entry_pos : entry_pos + INDEX_ENTRY_SIZE] = _ENTRY.pack(
            key_hash, phy_offset, time_diff, slot_value
        )
        write_slot(mm, slot_pos, count)
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def has_entry(self, key_hash: int, phy_offset: int) -> bool:
        """Whether key_hash's chain holds an entry for phy_offset (newest entries first, so
        the walk stops at the first older record)."""
        mm = self.mf.mm
        nxt = self._read_slot(INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE)
        for _ in range(self.index_count):
            if nxt <= 0 or nxt >= self.index_count:
                return False
            h, phy, _, prev = _ENTRY.unpack_from(mm, self._entries_start + nxt * INDEX_ENTRY_SIZE)
            if h == key_hash and phy == phy_offset:
                return True
            if phy < phy_offset or prev >= nxt:
                return False
            nxt = prev
        return False

    def mark_seen(self, phy_offset: int) -> None:
        self.end_phy_offset = phy_offset
        self.dirty = True
        write_end_phy(self.mf.mm, phy_offset)

    def truncate(self, phy_offset: int) -> int:
        """Undo, newest first, the entries pointing at or past phy_offset; returns how many.

        Each removed entry is the head of its slot's chain (entries are undone in reverse
        order of insertion), so the slot goes back to the entry's predecessor.
        """
        mm = self.mf.mm
        removed = 0
        while self.index_count > 1:
            last = self.index_count - 1
            pos = self._entries_start + last * INDEX_ENTRY_SIZE
            key_hash, phy, _, prev = _ENTRY.unpack_from(mm, pos)
            if phy < phy_offset:
                break
            slot_pos = INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE
            self._reserve_slot_page(slot_pos)
            self._reserve_entries(pos + INDEX_ENTRY_SIZE)
            write_slot(mm, slot_pos, prev)
            if prev == 0:
                self.hash_slot_count -= 1
            mm[pos : pos + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
            self.index_count = last
            removed += 1
        if self.index_count > 1:
            _, phy, diff, _ = _ENTRY.unpack_from(
                mm, self._entries_start + (self.index_count - 1) * INDEX_ENTRY_SIZE
            )
            self.end_phy_offset = phy
            self.end_timestamp = self.begin_timestamp + diff * 1000
        else:
            self.end_phy_offset = self.begin_phy_offset = self.end_timestamp = 0
            self.begin_timestamp = 0
        self.end_phy_offset = min(self.end_phy_offset, phy_offset - 1)
        self._write_header()
        return removed

    def time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to out the phy offsets of entries for key's hash stored within [begin, end]."""
        if self.index_count <= 1:
            return
        mm = self.mf.mm
        key_hash = index_key_hash(key)
        nxt = self._read_slot(INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE)
        if nxt <= 0 or nxt >= self.index_count:
            return
        # Each hop goes to an older entry; the bound stops a corrupted chain from looping.
        for _ in range(self.index_count):
            if len(out) >= max_num:
                return
            h, phy, time_diff, prev = _ENTRY.unpack_from(
                mm, self._entries_start + nxt * INDEX_ENTRY_SIZE
            )
            if time_diff < 0:
                return
            t = self.begin_timestamp + time_diff * 1000
            if h == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > self.index_count or prev >= nxt or t < begin:
                return
            nxt = prev

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self.mf.sync()


class IndexService:
    """The list of index files, newest last; builds entries and answers key queries."""

    def __init__(
        self, directory: Path, slot_num: int, index_num: int, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.directory = directory
        self.clock = clock  # names new index files
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self.lock = threading.RLock()

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        size = IndexFile.file_size(self.slot_num, self.index_num)
        for name in sorted(os.listdir(self.directory)):
            path = self.directory / name
            if not name.isdigit():
                continue
            if path.stat().st_size != size:
                log.warning("index file %s has a different size; ignoring it", path)
                continue
            mf = MappedFile.open(path, 0, size, INDEX_ENTRIES_RESERVE)
            self.files.append(IndexFile(mf, self.slot_num, self.index_num))
        if self.files:
            # Written and read at random places (slots by key hash): no read-around, as a new
            # file has (mapped_file.py).
            self.files[-1].mf.expect_writes(0)

    def warm_ranges(self, window: int) -> list[tuple[MappedFile, int, int]]:
        """The slot table (written at random) once it is wholly reserved, and the reserved
        entries the next appends will fill."""
        files = self.files
        if not files:
            return []
        f = files[-1]
        entries_at = f._entries_start + f.index_count * INDEX_ENTRY_SIZE
        reserved = f.mf.reserved
        return (
            [(f.mf, 0, min(f._entries_start + window, reserved))]
            if f.mf.prefaulted < f._entries_start and f.slots_reserved()
            else [(f.mf, entries_at, min(entries_at + window, reserved))]
        )

    def end_phy_offset(self) -> int:
        """How far the index has seen the CommitLog (-1: nothing indexed yet)."""
        with self.lock:
            return self.files[-1].end_phy_offset if self.files else -1

    def _writable(self) -> IndexFile:
        files = self.files
        if files and files[-1].index_count < self.index_num:
            return files[-1]
        with self.lock:
            if self.files and not self.files[-1].is_full():
                return self.files[-1]
            previous = self.files[-1] if self.files else None
            size = IndexFile.file_size(self.slot_num, self.index_num)
            name = index_file_name(self.clock.now_ms())
            if previous is not None and name <= previous.name:
                name = str(int(previous.name) + 1)
            mf = MappedFile.create(self.directory / name, 0, size, INDEX_ENTRIES_RESERVE)
            try:
                f = IndexFile(mf, self.slot_num, self.index_num, created=True)
            except OSError:
                mf.destroy()
                raise
            if previous is not None:
                # The new file continues where the full one stopped.
                f.begin_phy_offset = f.end_phy_offset = previous.end_phy_offset
                f.begin_timestamp = f.end_timestamp = previous.end_timestamp
                f._write_header()
            self.files.append(f)
            return f

    def build_index(
        self,
        topic: str,
        phy_offset: int,
        store_timestamp: int,
        sys_flag: int,
        uniq_key: str | None,
        keys: str | None,
    ) -> None:
        f = self._writable()
        # Records before the header's end offset are in (a new file starts at the full one's),
        # also in a file without entries yet: a restart re-dispatches from an older segment.
        if phy_offset < f.end_phy_offset:
            return
        # The record seen last comes again after a restart. Each key moves the header's end
        # offset to it, so a crash between two of its keys left the others out: add only those
        # (its first keys may be in the file that rolled over).
        again = phy_offset == f.end_phy_offset
        if SysFlag.transaction_value(sys_flag) == SysFlag.TRANSACTION_ROLLBACK_TYPE:
            f.mark_seen(phy_offset)
            return
        holders = self.files[-2:] if again else []
        for key_hash in key_hashes(topic, uniq_key, keys):
            if any(g.has_entry(key_hash, phy_offset) for g in holders):
                continue
            if not f.put_key(key_hash, phy_offset, store_timestamp):
                f = self._writable()
                f.put_key(key_hash, phy_offset, store_timestamp)
        if f.end_phy_offset != phy_offset:
            f.mark_seen(phy_offset)

    def build_index_batch(self, reqs: Sequence[IndexedRecord]) -> None:
        """build_index for each of reqs in turn, the records that need only writes in one
        call per index file."""
        i = 0
        n = len(reqs)
        while i < n:
            if _INSERT_IN_ONE_CALL:
                i = self._writable().put_requests(reqs, i)
            if i < n:
                r = reqs[i]
                self.build_index(
                    r.topic, r.phy_offset, r.store_timestamp, r.sys_flag, r.uniq_key, r.keys
                )
                i += 1

    def query(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> tuple[list[int], int, int]:
        """Phy offsets for topic#key stored in [begin, end], newest files first.

        Returns (offsets, last update timestamp, last update phy offset).
        """
        out: list[int] = []
        with self.lock:
            files = list(self.files)
        if not files:
            return out, 0, 0
        last = files[-1]
        for f in reversed(files):
            if len(out) >= max_num:
                break
            if f.time_matched(begin, end):
                try:
                    f.select(f"{topic}#{key}", max_num, begin, end, out)
                except ValueError:  # file removed by retention meanwhile
                    continue
            if f.begin_timestamp < begin:
                break
        return out, last.end_timestamp, last.end_phy_offset

    def truncate(self, phy_offset: int) -> None:
        """Forget every entry at or past phy_offset (the CommitLog was cut there)."""
        with self.lock:
            while len(self.files) > 1 and self.files[-1].begin_phy_offset >= phy_offset:
                self.files.pop().mf.destroy()
            for f in self.files[-2:]:
                removed = f.truncate(phy_offset)
                if removed:
                    log.info("index %s: dropped %d entries past %d", f.name, removed, phy_offset)

    def delete_expired(self, commitlog_min: int) -> int:
        """Delete index files that only point below commitlog_min (never the last)."""
        with self.lock:
            victims = [f for f in self.files[:-1] if f.end_phy_offset < commitlog_min]
            self.files = [f for f in self.files if f not in victims]
        for f in victims:
            f.mf.destroy()
        return len(victims)

    def flush(self) -> None:
        with self.lock:
            files = list(self.files[-2:])
        for f in files:
            try:
                f.flush()
            except ValueError:
                continue

    def close(self) -> None:
        with self.lock:
            for f in self.files:
                f.mf.close()
            self.files.clear()
