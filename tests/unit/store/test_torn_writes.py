"""A kill between any two stores of an index insert or of consume-queue units, replayed.

The pure-Python writers (the native ones follow them store for store) run on a buffer that
keeps a copy of itself before each of its slice assignments: each copy is what a SIGKILL just
before that store leaves in the file. A slice of up to 8 bytes is one machine store; a longer
one (an index entry) is several, so every cut of it is replayed too. Each state is loaded as
recovery loads it, then the records are dispatched again, as abnormal recovery does. Nothing
written before may be lost, nothing may be found twice, and a unit is whole or absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.store.consume_queue import ConsumeQueue, consume_queue_put_requests_py
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.index_file import IndexFile, IndexService
from pocketmq.store.index_insert import index_put_requests_py, key_hashes
from pocketmq.store.layout import CQ_UNIT_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE

SLOTS = 4  # long chains: each slot holds several keys
ENTRIES = 64
ENTRIES_START = INDEX_HEADER_SIZE + SLOTS * INDEX_SLOT_SIZE
CQ_FILE_UNITS = 16


class StoreRecorder(bytearray):
    """A buffer that keeps a copy of itself before each slice assignment, with where that
    assignment starts and what it writes."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.stores: list[tuple[bytes, int, bytes]] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        self.stores.append((bytes(self), key.start, bytes(value)))
        super().__setitem__(key, value)

    def killed_states(self) -> list[bytes]:
        """The file after a kill before each store or at the end, and with each store of more
        than 8 bytes (several machine stores, such as an index entry) cut short."""
        states = [before for before, _, _ in self.stores] + [bytes(self)]
        for before, at, value in self.stores:
            for cut in range(1, len(value) if len(value) > 8 else 0):
                states.append(before[:at] + value[:cut] + before[at + cut :])
        return states


def record(i: int) -> DispatchRequest:
    keys = f"k{i} shared{i % 3}"
    return DispatchRequest("T", 0, 100 * (i + 1), 100, 1000 + i, 1_000_000 + i, i, keys, f"U{i}", 0)


class Mapping:
    """What an IndexFile uses of its MappedFile, over a buffer, every block reserved."""

    def __init__(self, mm: bytearray) -> None:
        self.mm = mm
        self.reserved = len(mm)
        self.path = Path("20261124000000000")

    def reserve(self, end: int) -> None:
        pass

    def reserve_range(self, start: int, end: int) -> None:
        pass

    def data_end(self, pos: int = 0) -> int:
        return len(self.mm)  # no hole


def insert_in_one_call(mm: bytearray, reqs: list[DispatchRequest]) -> None:
    pages = bytearray(b"\x01") * 64  # every slot page reserved
    assert index_put_requests_py(mm, pages, len(mm), SLOTS, ENTRIES, reqs, 0) == len(reqs)


def insert_key_by_key(mm: bytearray, reqs: list[DispatchRequest]) -> None:
    f = IndexFile(Mapping(mm), SLOTS, ENTRIES)  # type: ignore[arg-type]
    for r in reqs:
        for h in key_hashes(r.topic, r.uniq_key, r.keys):
            assert f.put_key(h, r.phy_offset, r.store_timestamp)


def lookup(service: IndexService, key: str) -> list[int]:
    return sorted(service.query("T", key, 100, 0, 2**62)[0])


@pytest.mark.parametrize("insert", [insert_in_one_call, insert_key_by_key])
def test_an_index_insert_killed_at_any_store_loses_and_doubles_nothing(
    tmp_path: Path, insert: Callable[[bytearray, list[DispatchRequest]], None]
) -> None:
    earlier = [record(i) for i in range(12)]
    mm = bytearray(IndexFile.file_size(SLOTS, ENTRIES))
    insert(mm, earlier)
    new = record(12)
    recorder = StoreRecorder(bytes(mm))
    insert(recorder, [new])
    states = recorder.killed_states()
    assert len(states) > 2 * (8 + 19)  # two keys: entry, slot, six header fields; cut entries
    for n, state in enumerate(states):
        directory = tmp_path / str(n)
        directory.mkdir()
        (directory / "20261124000000000").write_bytes(state)
        service = IndexService(directory, SLOTS, ENTRIES)
        service.load()
        try:
            for r in earlier:
                assert lookup(service, f"k{r.queue_offset}") == [r.phy_offset], n
            for r in [*earlier, new]:
                service.build_index(r.topic, r.phy_offset, r.store_timestamp, r.sys_flag,
                                    r.uniq_key, r.keys)  # fmt: skip
            for r in [*earlier, new]:
                assert lookup(service, f"k{r.queue_offset}") == [r.phy_offset], n
                assert lookup(service, r.uniq_key or "") == [r.phy_offset], n
            shared0 = [r.phy_offset for r in [*earlier, new] if r.queue_offset % 3 == 0]
            assert lookup(service, "shared0") == shared0, n
            assert service.files[-1].index_count == 1 + 3 * 13, n
        finally:
            service.close()


def test_consume_queue_units_killed_at_any_store_are_whole_or_absent(tmp_path: Path) -> None:
    reqs = [record(i) for i in range(5)]
    recorder = StoreRecorder(bytes(CQ_FILE_UNITS * CQ_UNIT_SIZE))
    done, pos, _ = consume_queue_put_requests_py(recorder, 0, len(recorder), 0, "T", 0, reqs, 0)
    assert (done, pos) == (5, 5 * CQ_UNIT_SIZE)
    for n, state in enumerate(recorder.killed_states()):
        directory = tmp_path / str(n)
        directory.mkdir()
        (directory / f"{0:020d}").write_bytes(state)
        cq = ConsumeQueue("T", 0, directory, CQ_FILE_UNITS * CQ_UNIT_SIZE)
        cq.load()
        cq.recover()
        try:
            kept = cq.max_offset_in_queue()
            assert [cq.unit(i) for i in range(kept)] == [
                (r.phy_offset, r.size, r.tags_code) for r in reqs[:kept]
            ], n
        finally:
            cq.mfq.close()
