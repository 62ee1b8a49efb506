"""A put's index entries written into an index file's mapping in one call.

``index_put_requests`` (native in ``pocketmq._speedups``, this module's ``*_py`` function the
reference, bound through ``protocol.native.select``) inserts the keys of dispatch requests
(``UNIQ_KEY``, then each ``KEYS`` word) into one index file, exactly as
``IndexService.build_index`` would, record after record, and stops at the first record that
needs more than a write: a slot page or entry range not yet reserved (store/reserve.py: nothing
is written through a mapping before its blocks are reserved), a full file, or a record seen
again after a restart. It returns that record's position; the caller reserves, rolls over or
deduplicates through ``build_index`` and calls again. A record is written whole or not at all.

It does no I/O and no reservation: the caller passes the file's reservation mark and its
slot-page flags, and re-reads the header from the mapping afterwards.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.native import select
from pocketmq.protocol.properties import KEY_SEPARATOR, java_string_hash, java_string_hash_concat
from pocketmq.store.layout import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from pocketmq.store.reserve import RESERVE_ALIGN

HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INT_MAX = 2147483647
_END_PHY_AT = 24


# A kill must leave each header field and each slot either old or new: a count cut in the
# middle of its bytes undoes hundreds of good entries at recovery, a slot cut so points into
# another key's chain and hides the older entries of its own. struct.pack_into writes a
# big-endian int a byte at a time; a slice assignment of 4 or 8 bytes is one memcpy, one store.
def write_slot(mm: mmap.mmap | bytearray, pos: int, entry: int) -> None:
    mm[pos : pos + 4] = _SLOT.pack(entry)


def write_end_phy(mm: mmap.mmap | bytearray, phy_offset: int) -> None:
    mm[_END_PHY_AT : _END_PHY_AT + 8] = _I64.pack(phy_offset)


def write_header(
    mm: mmap.mmap | bytearray, begin_timestamp: int, end_timestamp: int, begin_phy_offset: int,
    end_phy_offset: int, hash_slot_count: int, index_count: int,
) -> None:  # fmt: skip
    """The header field by field, the index count last: it is what commits an insert."""
    mm[0:8] = _I64.pack(begin_timestamp)
    mm[8:16] = _I64.pack(end_timestamp)
    mm[16:24] = _I64.pack(begin_phy_offset)
    mm[24:32] = _I64.pack(end_phy_offset)
    mm[32:36] = _SLOT.pack(hash_slot_count)
    mm[36:40] = _SLOT.pack(index_count)


class IndexedRecord(Protocol):
    """What the index reads of a dispatch request (store.dispatch.DispatchRequest)."""

    @property
    def topic(self) -> str: ...
    @property
    def phy_offset(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def uniq_key(self) -> str | None: ...
    @property
    def keys(self) -> str | None: ...


@lru_cache(maxsize=4096)
def _topic_prefix_hash(topic: str) -> int:
    return java_string_hash(topic + "#")


def key_hashes(topic: str, uniq_key: str | None, keys: str | None) -> list[int]:
    """The index hashes of a record's keys, in insertion order: abs(hashCode of topic#key),
    0 for Integer.MIN_VALUE."""
    wanted: list[str] = []
    if uniq_key:
        wanted.append(uniq_key)
    if keys:
        wanted.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    prefix = _topic_prefix_hash(topic)
    out = []
    for k in wanted:
        h = java_string_hash_concat(prefix, k)
        out.append(0 if h == -(1 << 31) else abs(h))
    return out


def index_put_requests_py(
    mm: mmap.mmap | bytearray,
    slot_pages: bytearray,
    reserved: int,
    slot_num: int,
    index_num: int,
    reqs: Sequence[IndexedRecord],
    start: int,
) -> int:
    """Insert the keys of reqs[start:] until a record needs the caller; returns its position
    (len(reqs) when all are in)."""
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = HEADER.unpack_from(mm, 0)
    count = max(count, 1)
    entries_start = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
    i = start
    while i < len(reqs):
        if count >= index_num:
            return i  # build_index rolls over to a new file first, whatever the record
        r = reqs[i]
        phy = r.phy_offset
        if phy <= end_phy:
            if phy == end_phy:
                return i  # seen again: only its missing keys go in (build_index)
            i += 1
            continue
        if SysFlag.transaction_value(r.sys_flag) == SysFlag.TRANSACTION_ROLLBACK_TYPE:
            end_phy = phy
            write_end_phy(mm, phy)
            i += 1
            continue
        hashes = key_hashes(r.topic, r.uniq_key, r.keys)
        if count + len(hashes) > index_num:
            return i
        if entries_start + (count + len(hashes)) * INDEX_ENTRY_SIZE > reserved:
            return i
        for h in hashes:
            page = (INDEX_HEADER_SIZE + (h % slot_num) * INDEX_SLOT_SIZE) // RESERVE_ALIGN
            if page >= len(slot_pages) or not slot_pages[page]:
                return i
        ts = r.store_timestamp
        for h in hashes:
            slot_pos = INDEX_HEADER_SIZE + (h % slot_num) * INDEX_SLOT_SIZE
            prev = _SLOT.unpack_from(mm, slot_pos)[0]
            if prev <= 0 or prev >= count:
                prev = 0
            diff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), _INT_MAX)
            at = entries_start + count * INDEX_ENTRY_SIZE
            mm[at : at + INDEX_ENTRY_SIZE] = _ENTRY.pack(h, phy, diff, prev)
            write_slot(mm, slot_pos, count)
            if count <= 1:
                begin_phy, begin_ts = phy, ts
            if prev == 0:
                slot_count += 1
            count += 1
            end_phy, end_ts = phy, ts
            write_header(mm, begin_ts, end_ts, begin_phy, end_phy, slot_count, count)
        if end_phy != phy:
            end_phy = phy
            write_end_phy(mm, phy)
        i += 1
    return i


index_put_requests = select("index_put_requests", index_put_requests_py)
