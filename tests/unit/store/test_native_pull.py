"""The pull walk in C (pull_scan) against the pure-Python reference: the same result or the
same exception for random segment lists (units pointing anywhere, blanks, bogus offsets, short or
closed mappings, every limit), and the same GetResult from get_message over random stores (many
topics and queues, tags, records at segment ends, tag and SQL92 filters, small byte limits).

Skipped when the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

import asyncio
import mmap
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.filter import compile_sql92
from pocketmq.protocol.message import MessageExt
from pocketmq.store import GetResult, MessageStore, SqlFilter, TagFilter, pull_read, pull_scan
from pocketmq.store.config import StoreConfig
from pocketmq.store.pull_scan import BLANK_UNIT_SIZE, pull_scan_py

speedups = pytest.importorskip("pocketmq._speedups")

_UNIT = struct.Struct(">qiq")
TAG_CODES = [0, 1, 2, 3, -(1 << 63), (1 << 63) - 1]


class Seg:
    """A segment as the walk reads it (MappedFile's three attributes)."""

    __slots__ = ("file_from_offset", "mm", "wrote_position")

    def __init__(self, file_from_offset: int, wrote_position: int, mm: Any) -> None:
        self.file_from_offset = file_from_offset
        self.wrote_position = wrote_position
        self.mm = mm


def closed_mapping() -> mmap.mmap:
    mm = mmap.mmap(-1, 4096)
    mm.close()
    return mm


def outcome(f: Callable[..., object], *args: object) -> object:
    try:
        return f(*args)
    except Exception as exc:
        return type(exc), str(exc)


def rare(draw: st.DrawFn) -> bool:
    """True one time in ten: a bogus offset, a short or closed mapping."""
    return draw(st.integers(0, 9)) == 0


@st.composite
def commitlogs(draw: st.DrawFn) -> tuple[list[Seg], int]:
    size = draw(st.sampled_from([64, 100, 256]))
    base = draw(st.sampled_from([0, 0, 256, 1 << 40]))
    segs = []
    for i in range(draw(st.integers(0, 3))):
        start = base + i * size + (draw(st.sampled_from([1, -size])) if rare(draw) else 0)
        wrote = draw(st.integers(0, size + 8)) if rare(draw) else size
        kind = draw(st.integers(0, 9))
        mm: Any = (
            closed_mapping() if kind == 0
            else draw(st.binary(max_size=size)) if kind == 1
            else draw(st.binary(min_size=size, max_size=size))
        )  # fmt: skip
        segs.append(Seg(start, wrote, mm))
    return segs, size


@st.composite
def units(draw: st.DrawFn, commitlog: list[Seg]) -> bytes:
    out = bytearray()
    for _ in range(draw(st.integers(0, 40))):
        if commitlog and not rare(draw):
            seg = draw(st.sampled_from(commitlog))
            phy = seg.file_from_offset + draw(st.integers(0, 63))
            size = draw(st.integers(1, 40))
        else:
            phy = draw(st.one_of(st.integers(-5, 600), st.sampled_from([-(1 << 63), 1 << 62])))
            size = draw(st.one_of(st.integers(-3, 300), st.just(BLANK_UNIT_SIZE)))
        tags = draw(st.sampled_from(TAG_CODES))
        out += _UNIT.pack(phy, size, tags)
    return bytes(out)


@st.composite
def consume_queues(draw: st.DrawFn, commitlog: list[Seg]) -> tuple[list[Seg], int]:
    size = 50 if rare(draw) else draw(st.sampled_from([40, 60, 200]))
    data = draw(units(commitlog))
    segs = []
    for i in range((len(data) + size - 1) // size):
        chunk = data[i * size : (i + 1) * size]
        wrote = draw(st.integers(0, size + 4)) if rare(draw) else len(chunk)
        mm: Any = closed_mapping() if rare(draw) else chunk + draw(st.binary(max_size=3))
        shift = draw(st.sampled_from([20, -20])) if rare(draw) else 0
        segs.append(Seg(i * size + shift, wrote, mm))
    return segs, size


LIMIT = st.one_of(st.integers(-1, 45), st.sampled_from([1 << 62, 1 << 70]))
BYTES = st.one_of(st.integers(-1, 400), st.sampled_from([1 << 62, 1 << 70]))


@settings(deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_pull_scan_matches_the_reference(data: st.DataObject) -> None:
    cl, cl_size = data.draw(commitlogs())
    cq, cq_size = data.draw(consume_queues(cl))
    codes = data.draw(st.one_of(st.none(), st.frozensets(st.sampled_from([*TAG_CODES, 1 << 70]))))
    record_filter = data.draw(st.sampled_from([None, None, None, lambda raw: len(raw) % 2 == 0]))
    args = (
        cq, cq_size, data.draw(st.one_of(st.integers(0, 12), st.integers(0, 45), st.just(1 << 70))),
        cl, cl_size, data.draw(st.sampled_from([-1, 0, 0, 30, 1 << 40])),
        codes, record_filter,
        data.draw(LIMIT), data.draw(BYTES),
        data.draw(LIMIT),
    )  # fmt: skip
    assert outcome(speedups.pull_scan, *args) == outcome(pull_scan_py, *args)


@pytest.mark.parametrize(
    "change",
    [
        {1: 0},  # a zero file size
        {0: tuple},  # not a list
        {6: {1, 2.0}},  # a code that is not an int
        {6: [1, 2]},  # codes that are not a set
        {8: 1.5},  # a limit that is not an int
    ],
)
def test_off_path_arguments_meet_the_reference(change: dict[int, Any]) -> None:
    cl = [Seg(0, 64, bytes(64))]
    cq = [Seg(0, 40, _UNIT.pack(0, 10, 2) + _UNIT.pack(10, 10, 1))]
    args: list[Any] = [cq, 40, 0, cl, 64, 0, frozenset({1}), None, 32, 1000, 100]
    for i, value in change.items():
        args[i] = value(args[i]) if value is tuple else value
    assert outcome(speedups.pull_scan, *args) == outcome(pull_scan_py, *args)


def test_the_result_is_the_records_and_their_units() -> None:
    records = bytes(range(64))
    cl = [Seg(0, 64, records)]
    cq = [Seg(0, 60, b"".join(_UNIT.pack(p, 10, p) for p in (0, 10, 20)))]
    body, units, next_begin, last_phy, removing = speedups.pull_scan(
        cq, 60, 0, cl, 64, 0, frozenset({0, 20}), None, 32, 1000, 100
    )
    assert body == records[0:10] + records[20:30]
    assert memoryview(units).cast("q").tolist() == [0, 10, 2, 10]
    assert (next_begin, last_phy, removing) == (3, 20, False)


# --- get_message over real stores ---------------------------------------------------------


def sql(expression: str) -> SqlFilter:
    return SqlFilter(compile_sql92(expression))


FILTERS = [None, TagFilter.parse("a"), TagFilter.parse("a || c"), sql("TAGS = 'b' OR n > 3")]
# (topic, queue id, tags, body size); bodies up to 900 bytes end 4 KiB segments often.
PUT = st.tuples(
    st.integers(0, 2),
    st.integers(0, 2),
    st.sampled_from(["a", "b", "c", None]),
    st.integers(1, 900),
)
# (topic, queue id, offset, max_nums, filter); topic 3 does not exist.
QUERY = st.tuples(
    st.integers(0, 3),
    st.integers(0, 2),
    st.integers(0, 30),
    st.integers(1, 40),
    st.integers(0, len(FILTERS) - 1),
)


def fill(store: MessageStore, puts: list[tuple[int, int, str | None, int]]) -> None:
    async def run() -> None:
        for topic, queue_id, tags, size in puts:
            props = {"n": str(size % 7)}
            if tags is not None:
                props["TAGS"] = tags
            m = MessageExt(topic=f"T{topic}", body=bytes([size % 251]) * size,
                           queue_id=queue_id, properties=props)  # fmt: skip
            assert (await store.put_message(m)).ok

    asyncio.run(run())


@settings(max_examples=30, deadline=None, database=None, derandomize=True)
@given(
    puts=st.lists(PUT, max_size=70),
    max_bytes=st.sampled_from([256 * 1024, 1500, 1]),
    queries=st.lists(QUERY, min_size=1, max_size=12),
)
def test_get_message_is_the_same_with_either_walk(
    puts: list[tuple[int, int, str | None, int]],
    max_bytes: int,
    queries: list[tuple[int, int, int, int, int]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        config = StoreConfig(
            store_path_root_dir=Path(root), mapped_file_size_commit_log=4096,
            mapped_file_size_consume_queue=200, max_message_size=2000,
            max_transfer_bytes_on_message_in_memory=max_bytes,
            clean_resource_interval=3_600_000,
        )  # fmt: skip
        store = MessageStore(config)
        store.disk_usage = lambda _path: (10, 100)  # type: ignore[method-assign]
        store.open()
        try:
            fill(store, puts)
            for topic, queue_id, offset, max_nums, which in queries:
                got = []
                for walk in (speedups.pull_scan, pull_scan_py):
                    pull_read.pull_scan = walk  # type: ignore[attr-defined]
                    got.append(
                        store.get_message(f"T{topic}", queue_id, offset, max_nums, FILTERS[which])
                    )
                assert got[0] == got[1]
                assert isinstance(got[0], GetResult)
                assert b"".join(got[0].messages) == got[0].body
                assert got[0].message_count == len(got[0].queue_offsets)
        finally:
            pull_read.pull_scan = pull_scan.pull_scan  # type: ignore[attr-defined]
            store.close()
