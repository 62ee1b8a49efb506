"""MessageStore.truncate: after a cut at a record boundary the store equals one that never had
the dropped records, byte for byte, queue for queue, key for key, and after a reopen."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from store_helpers import msg, open_store, put_batch, put_ok, read_queue, small_config

from pocketmq.clock import FakeClock
from pocketmq.errors import StoreError
from pocketmq.protocol.message import SysFlag
from pocketmq.store import MessageStore
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.flush import FlushCommitLogService
from pocketmq.store.inspect import inspect_store

START_MS = 1_700_000_000_000
QUEUES = [("A", 0), ("A", 1), ("B", 0), ("C", 1), ("D", 0)]
KEYS = [("A", "ka0"), ("A", "ka9"), ("A", "shared"), ("B", "kb4"), ("D", "kd1"), ("C", "kc2")]


def first_part(store: MessageStore, clock: FakeClock) -> None:
    """Kept by every store: two topics, keys, a prepared transaction message, a batch."""
    for i in range(30):
        clock.advance(300)
        put_ok(store, msg("A", b"a" * (90 + i * 7), queue_id=i % 2, keys=f"ka{i} shared"))
        if i % 4 == 0:
            put_ok(store, msg("B", f"b{i}".encode() * 20, keys=f"kb{i}"))
    put_ok(store, msg("A", b"half", sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE, keys="tx"))
    assert put_batch(store, [msg("C", f"c{i}".encode(), queue_id=1) for i in range(5)]).ok


def dropped_part(store: MessageStore, clock: FakeClock) -> None:
    """Written, then cut off: more of the same queues, and a topic only it has (D)."""
    for i in range(40):
        clock.advance(300)
        put_ok(store, msg("A", b"x" * (150 + i), queue_id=i % 2, keys=f"ka{i} shared"))
        put_ok(store, msg("D", b"d" * 120, keys=f"kd{i}"))
    assert put_batch(store, [msg("C", b"dropped", queue_id=1, keys=f"kc{i}") for i in range(4)]).ok


def last_part(store: MessageStore, clock: FakeClock) -> None:
    """Written after the cut (as a replication stream resumes)."""
    for i in range(25):
        clock.advance(300)
        put_ok(store, msg("A", b"z" * (60 + i * 11), queue_id=i % 2, keys=f"ka{i}"))
    assert put_batch(
        store, [msg("C", f"C{i}".encode(), queue_id=1, keys=f"kc{i}") for i in range(3)]
    ).ok


def commitlog_bytes(store: MessageStore) -> bytes:
    end = store.max_phy_offset()
    data = b"".join(p.read_bytes() for p in sorted((store.root / "commitlog").iterdir()))
    return data[:end]


def state(store: MessageStore) -> dict[Any, Any]:
    out: dict[Any, Any] = {
        "max_phy": store.max_phy_offset(),
        "topics": store.topics(),
        "queue_table": dict(store.commitlog.topic_queue_table),
    }
    for topic, qid in QUEUES:
        out[topic, qid] = (
            store.get_min_offset_in_queue(topic, qid),
            store.get_max_offset_in_queue(topic, qid),
            read_queue(store, topic, qid) if store.find_consume_queue(topic, qid) else None,
        )
    for topic, key in KEYS:
        out["query", topic, key] = sorted(store.query_message(topic, key, 100, 0, 2**62).messages)
    return out


def build(root: Path, *, drop: bool, cut_at: int | None = None) -> tuple[MessageStore, int]:
    """A store with first_part (+ dropped_part, cut off) + last_part; returns it and the cut."""
    clock = FakeClock(START_MS)
    store = open_store(small_config(root), clock)
    first_part(store, clock)
    cut = store.max_phy_offset()
    if drop:
        dropped_part(store, FakeClock(START_MS + 10**9))
        store.truncate(cut if cut_at is None else cut_at)
    last_part(store, clock)
    return store, cut


def test_truncate_then_append_equals_a_store_that_never_had_the_records(tmp_path: Path) -> None:
    cut_store, cut = build(tmp_path / "cut", drop=True)
    plain, plain_cut = build(tmp_path / "plain", drop=False)
    try:
        assert cut == plain_cut
        assert cut_store.find_consume_queue("D", 0) is None
        assert not (cut_store.root / "consumequeue" / "D").exists()
        assert commitlog_bytes(cut_store) == commitlog_bytes(plain)
        expected = state(plain)
        assert state(cut_store) == expected
        assert expected["query", "A", "ka9"]  # the comparison is not between two empty answers
    finally:
        cut_store.close()
        plain.close()
    for root in (cut_store.root, plain.root):
        report = inspect_store(root, verify=True, config=small_config(root))
        assert report.problem_count == 0, report.problems
        assert report.records > 0
    reopened = open_store(small_config(cut_store.root))
    try:
        assert state(reopened) == expected
    finally:
        reopened.close()


def test_cut_at_a_segment_start_drops_whole_segments(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    store = open_store(small_config(tmp_path / "s"), clock)
    try:
        first_part(store, clock)
        dropped_part(store, clock)
        segments = sorted((store.root / "commitlog").iterdir())
        assert len(segments) >= 4
        cut = int(segments[2].name)
        a_max = store.get_max_offset_in_queue("A", 0)
        store.truncate(cut)
        assert store.max_phy_offset() == cut
        assert [p for p in (store.root / "commitlog").iterdir() if int(p.name) >= cut + 4096] == []
        units = list(store.find_consume_queue("A", 0).iter_units(0))  # type: ignore[union-attr]
        assert all(phy < cut for _, phy, _, _ in units)
        assert store.get_max_offset_in_queue("A", 0) == len(units) < a_max
        assert store.commitlog.topic_queue_table["A", 0] == len(units)
        put_ok(store, msg("A", b"after"))
        assert store.commitlog.read_record(cut) is not None
    finally:
        store.close()
    report = inspect_store(store.root, verify=True, config=small_config(store.root))
    assert report.problem_count == 0, report.problems


def test_cut_at_the_end_changes_nothing(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    store = open_store(small_config(tmp_path / "s"), clock)
    try:
        first_part(store, clock)
        before = state(store)
        store.truncate(store.max_phy_offset())
        assert state(store) == before
    finally:
        store.close()


@pytest.mark.parametrize("where", ["inside a record", "past the end", "below the start"])
def test_refuses_a_cut_that_is_not_a_record_boundary(tmp_path: Path, where: str) -> None:
    clock = FakeClock(START_MS)
    store = open_store(small_config(tmp_path / "s"), clock)
    try:
        first_part(store, clock)
        offset = {
            "inside a record": put_ok(store, msg("A", b"victim")).phy_offsets[0] + 9,
            "past the end": store.max_phy_offset() + 1,
            "below the start": -1,
        }[where]
        before = state(store)
        data = commitlog_bytes(store)
        with pytest.raises(StoreError, match="cannot truncate"):
            store.truncate(offset)
        assert state(store) == before
        assert commitlog_bytes(store) == data
    finally:
        store.close()


async def test_puts_waiting_for_a_flush_past_the_cut_are_answered_not_flushed(
    tmp_path: Path,
) -> None:
    # Not started: the requests stay pending until the truncation answers them.
    service = FlushCommitLogService(
        CommitLog(small_config(tmp_path)), True, 500, 60_000, lambda _ts: None
    )
    loop = asyncio.get_running_loop()
    kept = service.request(100, loop)
    cut_off = service.request(300, loop)
    service.abandon_beyond(200)
    assert await cut_off is False
    assert not kept.done()
