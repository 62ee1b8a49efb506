"""Conformance of MessageStore: puts, gets, offsets, lookups, filters and refusals."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest
from store_helpers import (
    StoreFactory,
    msg,
    put,
    put_batch,
    put_ok,
    read_queue,
    segment_paths,
    small_config,
)

from pocketmq.clock import FakeClock
from pocketmq.errors import ProtocolError, StoreError
from pocketmq.protocol.message import SysFlag, create_offset_msg_id
from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.protocol.properties import tags_code
from pocketmq.protocol.record_codec import (
    BLANK_MAGIC_CODE,
    decode_message,
    decode_record_info,
    peek_record_size,
)
from pocketmq.store import GetStatus, MessageStore, PutStatus, TagFilter
from pocketmq.store.commitlog import PWRITE_MIN, SCRATCH_KEPT
from pocketmq.store.config import FlushDiskType
from pocketmq.store.layout import is_offset_file_name
from pocketmq.store.mapped_file import MappedFile


def test_put_get_round_trip_of_every_field(open_small: StoreFactory) -> None:
    store = open_small(store_host="10.1.2.3:10911")
    m = msg(
        topic="TopicA",
        body=b"\x00\x01 payload \xff",
        queue_id=2,
        tags="TagA",
        keys="k1 k2",
        flag=9,
        sys_flag=SysFlag.COMPRESSED,
        born_timestamp=1_600_000_000_000,
        born_host=("fe80::5", 45678),
        reconsume_times=3,
        prepared_transaction_offset=77,
        properties={"UNIQ_KEY": "U1", "custom": "värde"},
    )
    result = put_ok(store, m)
    assert result.queue_offset == 0
    assert result.msg_num == 1
    assert result.store_host == ("10.1.2.3", 10911)

    got = store.get_message("TopicA", 2, 0, 10)
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == [0]
    assert got.next_begin_offset == 1
    raw = got.messages[0]
    assert len(raw) == result.wrote_bytes
    out = decode_message(raw, check_crc=True)
    assert out.topic == "TopicA"
    assert out.body == m.body
    assert out.queue_id == 2
    assert out.flag == 9
    assert out.properties == m.properties
    assert out.sys_flag == SysFlag.COMPRESSED | SysFlag.BORNHOST_V6
    assert out.born_timestamp == 1_600_000_000_000
    assert out.born_host == ("fe80::5", 45678)
    assert out.store_host == ("10.1.2.3", 10911)
    assert out.reconsume_times == 3
    assert out.prepared_transaction_offset == 77
    assert out.store_timestamp == result.store_timestamp
    assert out.queue_offset == 0
    assert out.phy_offset == result.phy_offset
    assert out.store_size == len(raw)
    assert out.msg_id == result.msg_id == create_offset_msg_id(("10.1.2.3", 10911), out.phy_offset)

    second = put_ok(store, msg(topic="TopicA", queue_id=2))
    assert second.queue_offset == 1
    assert second.phy_offset == result.phy_offset + result.wrote_bytes
    assert put_ok(store, msg(topic="TopicA", queue_id=0)).queue_offset == 0
    assert put_ok(store, msg(topic="TopicB", queue_id=2)).queue_offset == 0


def test_arrival_listener_sees_each_put_once_per_queue(open_small: StoreFactory) -> None:
    store = open_small()
    seen: list[tuple[str, int, int]] = []
    store.on_message_arrived = lambda t, q, o: seen.append((t, q, o))
    put_ok(store, msg(queue_id=1))
    put_batch(store, [msg(queue_id=1), msg(queue_id=1)])
    assert seen == [("T", 1, 0), ("T", 1, 2)]
    # A put over several queues (a transaction's commit and op, a read's coalesced sends):
    # one call per queue, with that queue's last offset, once the put's units are written; a
    # prepared record wakes nobody.
    prepared = msg(topic="U", sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE)
    put_batch(store, [msg(queue_id=1), msg(queue_id=1), prepared, msg(topic="U", queue_id=2),
                      msg(queue_id=1), msg(queue_id=0), msg(topic="U", queue_id=2)])  # fmt: skip
    assert seen[2:] == [("T", 1, 5), ("U", 2, 1), ("T", 0, 0)]


def test_a_queue_that_cannot_reserve_wakes_for_what_it_wrote_and_catches_up(
    open_small: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consume queue whose next chunk cannot be reserved (disk full) mid-run keeps the units
    written before it, and its waiters are told of them; the records stay in the CommitLog and
    the next put's dispatch completes the queue."""
    store = open_small()
    seen: list[tuple[str, int, int]] = []
    store.on_message_arrived = lambda t, q, o: seen.append((t, q, o))
    put_ok(store, msg())
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    last = cq.mfq.files[-1]
    last.reserved = last.wrote_position + 20  # room for one more unit

    reserve = MappedFile.reserve

    def no_space_there(mf: MappedFile, end: int) -> None:
        if mf is last:
            raise OSError(errno.ENOSPC, "No space left on device")
        reserve(mf, end)

    monkeypatch.setattr(MappedFile, "reserve", no_space_there)
    assert put_batch(store, [msg(body=b"a"), msg(body=b"b"), msg(body=b"c")]).ok
    assert cq.max_offset_in_queue() == 2
    assert seen == [("T", 0, 0), ("T", 0, 1)]
    monkeypatch.undo()
    put_ok(store, msg(body=b"d"))
    assert cq.max_offset_in_queue() == 5
    assert seen[-1] == ("T", 0, 4)
    assert [decode_message(r).body for r in read_queue(store, "T", 0)] == [
        b"body",
        b"a",
        b"b",
        b"c",
        b"d",
    ]


def test_batch_gets_consecutive_offsets_and_contiguous_records(open_small: StoreFactory) -> None:
    store = open_small()
    put_ok(store, msg(body=b"single"))
    batch = [msg(body=f"batch-{i}".encode(), keys=f"b{i}") for i in range(5)]
    result = put_batch(store, batch)
    assert result.status is PutStatus.PUT_OK
    assert result.queue_offset == 1
    assert result.msg_num == 5
    offsets = result.phy_offsets
    for i, (phy, record) in enumerate(zip(offsets, read_queue(store, "T", 0)[1:], strict=True)):
        out = decode_message(record)
        assert out.phy_offset == phy
        assert out.queue_offset == 1 + i
        assert out.body == f"batch-{i}".encode()
        if i + 1 < len(offsets):
            assert offsets[i + 1] == phy + len(record)
    assert result.wrote_bytes == store.max_phy_offset() - offsets[0]
    assert result.msg_ids == [create_offset_msg_id(result.store_host, o) for o in offsets]
    assert put_ok(store, msg()).queue_offset == 6


def test_pwritten_puts_round_trip_and_a_huge_one_keeps_no_scratch(
    open_small: StoreFactory,
) -> None:
    # Puts of PWRITE_MIN and more are written with pwrite from a scratch buffer, kept for the
    # next ones only up to SCRATCH_KEPT.
    store = open_small(mapped_file_size_commit_log=4 * SCRATCH_KEPT, max_message_size=1 << 20)
    bodies = [bytes([i]) * (1 << 20) for i in range(6)]  # 6 MiB: past SCRATCH_KEPT
    assert PWRITE_MIN <= 50 * 1500
    for batch in ([msg(body=b"s" * 1500)] * 50, [msg(body=b) for b in bodies]):
        assert put_batch(store, batch).status is PutStatus.PUT_OK
    assert 0 < len(store.commitlog._scratch) <= SCRATCH_KEPT
    got = [decode_message(r).body for r in read_queue(store, "T", 0)]
    assert got == [b"s" * 1500] * 50 + bodies


def test_empty_batch_is_illegal(open_small: StoreFactory) -> None:
    store = open_small()
    assert put_batch(store, []).status is PutStatus.MESSAGE_ILLEGAL


def _records_in(path: Path) -> tuple[list[int], int]:
    """Positions of the records of a commitlog file and where they end."""
    data = path.read_bytes()
    positions = []
    pos = 0
    while True:
        size, magic = peek_record_size(data, pos)
        if magic == BLANK_MAGIC_CODE or size == 0:
            return positions, pos
        info = decode_record_info(data, pos, len(data), check_crc=True)
        assert info.phy_offset == int(path.name) + pos
        positions.append(pos)
        pos += size


def test_commitlog_rolls_and_closes_full_files_with_a_blank(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    results = [put_ok(store, msg(body=bytes([i]) * (150 + i * 7), keys=f"k{i}")) for i in range(60)]
    files = segment_paths(store_root)
    assert len(files) >= 4
    for idx, path in enumerate(files):
        assert is_offset_file_name(path.name)
        assert int(path.name) == idx * 4096
        assert path.stat().st_size == 4096
    total = 0
    for path in files[:-1]:
        positions, end = _records_in(path)
        total += len(positions)
        data = path.read_bytes()
        # The blank record: its size covers the rest of the file, then the blank magic.
        assert struct.unpack_from(">iI", data, end) == (4096 - end, BLANK_MAGIC_CODE)
        assert 4096 - end >= 8
    positions, end = _records_in(files[-1])
    total += len(positions)
    assert total == 60
    assert store.max_phy_offset() == int(files[-1].name) + end
    assert [r.phy_offset for r in results] == sorted(r.phy_offset for r in results)
    records = read_queue(store, "T", 0)
    assert [decode_message(r).body for r in records] == [
        bytes([i]) * (150 + i * 7) for i in range(60)
    ]


def test_consume_queue_rolls(open_small: StoreFactory, store_root: Path) -> None:
    store = open_small()
    for i in range(35):
        put_ok(store, msg(body=str(i).encode(), queue_id=3))
    cq_dir = store_root / "consumequeue" / "T" / "3"
    names = sorted(p.name for p in cq_dir.iterdir())
    assert names == [f"{n:020d}" for n in (0, 200, 400, 600)]
    assert store.get_max_offset_in_queue("T", 3) == 35
    got = store.get_message("T", 3, 8, 5)
    assert got.queue_offsets == [8, 9, 10, 11, 12]  # across the file boundary
    assert [decode_message(r).body for r in got.messages] == [b"8", b"9", b"10", b"11", b"12"]
    assert len(read_queue(store, "T", 3)) == 35
    unit = store.find_consume_queue("T", 3).unit(34)  # type: ignore[union-attr]
    assert unit is not None
    assert unit[0] == store.get_commit_log_offset_in_queue("T", 3, 34)


def test_reopen_after_clean_close(store_root: Path, open_small: StoreFactory) -> None:
    store = open_small()
    for i in range(40):
        put_ok(store, msg(body=b"x" * 100, queue_id=i % 2, keys=f"key{i}", tags="t"))
    before = {q: read_queue(store, "T", q) for q in (0, 1)}
    max_phy = store.max_phy_offset()
    store.close()
    assert not (store_root / "abort").exists()

    again = open_small()
    assert again.last_exit_ok
    assert again.max_phy_offset() == max_phy
    assert {q: read_queue(again, "T", q) for q in (0, 1)} == before
    assert len(again.query_message("T", "key7", 10, 0, 2**62).messages) == 1
    result = put_ok(again, msg(queue_id=1))
    assert result.queue_offset == 20
    assert result.phy_offset == max_phy
    assert put_ok(again, msg(topic="New")).queue_offset == 0
    assert again.get_message("T", 1, 20, 1).status is GetStatus.FOUND


def test_get_message_statuses(open_small: StoreFactory, store_root: Path) -> None:
    (store_root / "consumequeue" / "T" / "5").mkdir(parents=True)
    store = open_small(file_reserved_time=1, delete_when=";".join(f"{h:02d}" for h in range(24)))
    got = store.get_message("Nope", 0, 0, 10)
    assert got.status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    got = store.get_message("T", 5, 3, 10)
    assert got.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert got.next_begin_offset == 0

    results = [put_ok(store, msg(body=b"y" * 300)) for _ in range(30)]
    got = store.get_message("T", 0, 4, 3)
    assert (got.status, got.queue_offsets, got.next_begin_offset) == (GetStatus.FOUND, [4, 5, 6], 7)
    assert (got.min_offset, got.max_offset) == (0, 30)
    got = store.get_message("T", 0, 30, 10)
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 30)
    got = store.get_message("T", 0, 31, 10)
    # With nothing removed yet, a client far ahead is sent back to 0.
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 0)

    store.commitlog.flush()
    old = 1_000_000_000
    for path in segment_paths(store_root)[:2]:
        os.utime(path, (old, old))
    assert store.run_retention() == 2
    first_kept = store.min_phy_offset()
    assert first_kept == 2 * 4096
    min_q = store.get_min_offset_in_queue("T", 0)
    assert results[min_q].phy_offset >= first_kept > results[min_q - 1].phy_offset
    got = store.get_message("T", 0, 0, 10)
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, min_q)
    assert store.get_message("T", 0, min_q, 1).status is GetStatus.FOUND
    got = store.get_message("T", 0, 99, 10)
    # Once the queue has a non-zero minimum, a client far ahead goes to the max offset.
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 30)


def test_tag_filter(open_small: StoreFactory) -> None:
    store = open_small()
    for tag in ["a", "b", "c", None, "a", "ab"]:
        put_ok(store, msg(tags=tag, body=(tag or "-").encode()))
    flt = TagFilter.parse("a || b")
    assert flt is not None
    got = store.get_message("T", 0, 0, 10, flt)
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == [0, 1, 4]
    assert [decode_message(r).body for r in got.messages] == [b"a", b"b", b"a"]
    assert got.next_begin_offset == 6
    got = store.get_message("T", 0, 2, 10, TagFilter.parse("b"))
    assert (got.status, got.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 6)
    assert TagFilter.parse("*") is None
    assert TagFilter.parse("") is None
    assert TagFilter.parse(None) is None
    assert TagFilter.parse(" || ") is None
    assert len(store.get_message("T", 0, 0, 10, TagFilter.parse("*")).messages) == 6


def test_max_transfer_count(open_small: StoreFactory) -> None:
    store = open_small(max_transfer_count_on_message_in_memory=3)
    for _ in range(10):
        put_ok(store, msg(body=b"z" * 200))
    got = store.get_message("T", 0, 0, 10)
    assert (got.queue_offsets, got.next_begin_offset) == ([0, 1, 2], 3)
    got = store.get_message("T", 0, 0, 2)  # the caller's max_msg_nums, when lower
    assert (got.queue_offsets, got.next_begin_offset) == ([0, 1], 2)


def test_max_transfer_bytes(open_small: StoreFactory) -> None:
    store = open_small(max_transfer_bytes_on_message_in_memory=700)
    sizes = [put_ok(store, msg(body=b"z" * 200)).wrote_bytes for _ in range(10)]
    assert 2 * sizes[0] <= 700 < 3 * sizes[0]
    got = store.get_message("T", 0, 4, 10)
    assert (got.queue_offsets, got.next_begin_offset) == ([4, 5], 6)
    assert got.buffer_total_size == 2 * sizes[0]


def test_one_record_larger_than_the_byte_limit_is_still_returned(
    open_small: StoreFactory,
) -> None:
    store = open_small(max_transfer_bytes_on_message_in_memory=100)
    for _ in range(3):
        put_ok(store, msg(body=b"z" * 200))
    got = store.get_message("T", 0, 1, 10)
    assert (got.queue_offsets, got.next_begin_offset) == ([1], 2)


def test_view_and_look_by_offset(open_small: StoreFactory) -> None:
    store = open_small()
    results = [put_ok(store, msg(body=f"m{i}".encode(), keys=f"k{i}")) for i in range(3)]
    for i, result in enumerate(results):
        viewed = store.view_message_by_id(result.msg_id)
        assert viewed is not None
        assert viewed.body == f"m{i}".encode()
        assert viewed.msg_id == result.msg_id
        looked = store.look_message_by_offset(result.phy_offset)
        assert looked is not None
        assert looked.queue_offset == i
        raw = store.select_one_message_by_offset(result.phy_offset)
        assert raw is not None
        assert raw == store.select_one_message_by_offset(result.phy_offset, len(raw))
    assert store.look_message_by_offset(results[1].phy_offset + 1) is None
    assert store.look_message_by_offset(store.max_phy_offset()) is None
    assert store.look_message_by_offset(10 * 4096) is None
    assert store.view_message_by_id(create_offset_msg_id(("127.0.0.1", 10911), 50_000)) is None
    with pytest.raises(ProtocolError):
        store.view_message_by_id("not-an-id")


def test_query_by_keys_and_uniq_key_in_a_time_range(
    open_small: StoreFactory, clock: FakeClock
) -> None:
    store = open_small(clock=clock)
    stamps = []
    for i in range(6):
        if i:
            clock.advance(10_000)
        props = {"UNIQ_KEY": f"U{i}"}
        put_ok(store, msg(body=f"m{i}".encode(), keys=f"order{i % 2} id{i}", properties=props))
        stamps.append(clock.now_ms())
    put_ok(store, msg(topic="Other", keys="order0 id0"))

    def bodies(key: str, begin: int = 0, end: int = 2**62, topic: str = "T") -> list[bytes]:
        found = store.query_message(topic, key, 32, begin, end).messages
        return sorted(decode_message(r).body for r in found)

    assert bodies("order0") == [b"m0", b"m2", b"m4"]
    assert bodies("order1") == [b"m1", b"m3", b"m5"]
    assert bodies("id3") == [b"m3"]
    assert bodies("U4") == [b"m4"]
    assert bodies("order0", topic="Other") == [b"body"]
    assert bodies("order") == []
    assert bodies("id3 ") == []
    # Time ranges: only records stored within [begin, end].
    assert bodies("order0", stamps[1], stamps[3]) == [b"m2"]
    assert bodies("order0", stamps[2], stamps[4]) == [b"m2", b"m4"]
    assert bodies("order1", stamps[4] + 1, 2**62) == [b"m5"]
    assert bodies("U1", stamps[2], 2**62) == []
    result = store.query_message("T", "order0", 2, 0, 2**62)
    assert len(result.messages) == 2  # max_num
    assert result.index_last_update_timestamp == stamps[-1]


def test_query_with_every_key_in_one_hash_slot(open_small: StoreFactory) -> None:
    store = open_small(max_hash_slot_num=1)
    # "Aa" and "BB" have the same String.hashCode, so their index entries match by hash too.
    put_ok(store, msg(body=b"Aa", keys="Aa"))
    for i in range(5):
        put_ok(store, msg(body=f"key{i}".encode(), keys=f"key{i}"))
    # Newer entries with the same hash must not crowd the older exact match out of the answer.
    for _ in range(20):
        put_ok(store, msg(body=b"BB", keys="BB"))
    put_ok(store, msg(topic="U", body=b"Aa in U", keys="Aa"))

    def bodies(key: str, max_num: int = 32) -> list[bytes]:
        found = store.query_message("T", key, max_num, 0, 2**62).messages
        return [decode_message(r).body for r in found]

    assert bodies("Aa") == [b"Aa"]
    assert bodies("BB") == [b"BB"] * 20
    assert bodies("BB", max_num=3) == [b"BB"] * 3
    assert bodies("Aa", max_num=1) == [b"Aa"]
    for i in range(5):
        assert bodies(f"key{i}") == [f"key{i}".encode()]
    assert bodies("key9") == []


def test_query_across_index_files(open_small: StoreFactory, store_root: Path) -> None:
    store = open_small(max_index_num=5, max_hash_slot_num=4)  # 4 entries per index file
    for i in range(25):
        put_ok(store, msg(body=f"m{i}".encode(), keys=f"k{i} shared", queue_id=i % 3))
    assert len(list((store_root / "index").iterdir())) >= 10
    for i in range(25):
        found = store.query_message("T", f"k{i}", 5, 0, 2**62).messages
        assert [decode_message(r).body for r in found] == [f"m{i}".encode()]
    shared = store.query_message("T", "shared", 100, 0, 2**62).messages
    assert sorted(decode_message(r).body for r in shared) == sorted(
        f"m{i}".encode() for i in range(25)
    )


def test_offset_in_queue_by_time(open_small: StoreFactory, clock: FakeClock) -> None:
    store = open_small(clock=clock)
    base = clock.now_ms()
    for i in range(10):
        if i:
            clock.advance(1000)
        put_ok(store, msg(body=str(i).encode()))
    assert store.get_offset_in_queue_by_time("T", 0, base - 5000) == 0
    assert store.get_offset_in_queue_by_time("T", 0, base) == 0
    assert store.get_offset_in_queue_by_time("T", 0, base + 3000) == 3
    assert store.get_offset_in_queue_by_time("T", 0, base + 3500) == 4
    assert store.get_offset_in_queue_by_time("T", 0, base + 9000) == 9
    assert store.get_offset_in_queue_by_time("T", 0, base + 9001) == 10
    assert store.get_offset_in_queue_by_time("Nope", 0, base) == 0
    assert store.get_message_store_timestamp("T", 0, 4) == base + 4000
    assert store.get_message_store_timestamp("T", 0, 10) == -1
    assert store.get_earliest_message_time("T", 0) == base
    assert store.get_earliest_message_time("Nope", 0) == -1


def test_min_and_max_offsets(open_small: StoreFactory) -> None:
    store = open_small()
    assert (store.min_phy_offset(), store.max_phy_offset()) == (0, 0)
    assert store.get_min_offset_in_queue("T", 0) == 0
    assert store.get_max_offset_in_queue("T", 0) == 0
    results = [put_ok(store, msg(queue_id=1)) for _ in range(4)]
    assert store.get_min_offset_in_queue("T", 1) == 0
    assert store.get_max_offset_in_queue("T", 1) == 4
    assert store.max_phy_offset() == results[-1].next_offset
    assert store.get_commit_log_offset_in_queue("T", 1, 2) == results[2].phy_offset
    assert store.get_commit_log_offset_in_queue("T", 1, 9) == 0
    assert store.topics() == ["T"]


def test_oversize_body_is_illegal_and_writes_nothing(open_small: StoreFactory) -> None:
    store = open_small()
    assert put(store, msg(body=b"x" * 2000)).ok
    before = store.max_phy_offset()
    result = put(store, msg(body=b"x" * 2001))
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert "max_message_size" in result.detail
    assert store.max_phy_offset() == before
    assert store.get_max_offset_in_queue("T", 0) == 1
    # One bad message fails the whole batch.
    assert put_batch(store, [msg(), msg(body=b"x" * 2001)]).status is PutStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset() == before


@pytest.mark.parametrize(
    ("field", "value"),
    [("flag", 2**31), ("sys_flag", -(2**31) - 1), ("born_timestamp", -1),
     ("reconsume_times", 10**20), ("queue_id", 2**31)],
)  # fmt: skip
def test_a_field_that_does_not_fit_its_slot_is_illegal_and_writes_nothing(
    open_small: StoreFactory, field: str, value: int
) -> None:
    store = open_small()
    bad = msg()
    setattr(bad, field, value)
    result = put(store, bad)
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert "does not fit" in result.detail
    assert store.max_phy_offset() == 0
    assert put(store, msg()).ok


def test_properties_too_large(open_small: StoreFactory) -> None:
    store = open_small()
    result = put(store, msg(properties={"big": "v" * 32767}))
    assert result.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert "32767" in result.detail
    assert store.max_phy_offset() == 0
    assert store.get_max_offset_in_queue("T", 0) == 0


def test_second_store_on_the_same_directory(open_small: StoreFactory, store_root: Path) -> None:
    first = open_small()
    put_ok(first, msg())
    second = MessageStore(small_config(store_root))
    with pytest.raises(StoreError, match="in use"):
        second.open()
    assert put(first, msg()).queue_offset == 1
    first.close()
    second.disk_usage = lambda _path: (10, 100)
    second.open()
    try:
        assert second.get_max_offset_in_queue("T", 0) == 2
    finally:
        second.close()


def test_closed_store_refuses_puts(open_small: StoreFactory) -> None:
    store = open_small()
    store.close()
    result = put(store, msg())
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "not running" in result.detail


def test_transactions_prepared_and_rolled_back_stay_out_of_queues(
    open_small: StoreFactory,
) -> None:
    store = open_small()
    prepared = put_ok(store, msg(sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE, keys="tx"))
    assert store.get_message("T", 0, 0, 10).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    normal = put_ok(store, msg(body=b"normal"))
    rollback = put_ok(store, msg(sys_flag=SysFlag.TRANSACTION_ROLLBACK_TYPE))
    commit = put_ok(store, msg(body=b"commit", sys_flag=SysFlag.TRANSACTION_COMMIT_TYPE))
    assert (normal.queue_offset, commit.queue_offset) == (0, 1)
    looked = store.look_message_by_offset(prepared.phy_offset)
    assert looked is not None
    assert SysFlag.transaction_value(looked.sys_flag) == SysFlag.TRANSACTION_PREPARED_TYPE
    assert store.look_message_by_offset(rollback.phy_offset) is not None
    got = store.get_message("T", 0, 0, 10)
    assert [decode_message(r).body for r in got.messages] == [b"normal", b"commit"]
    assert store.get_max_offset_in_queue("T", 0) == 2
    # Prepared messages are still found by key (the broker's check-back looks them up).
    assert len(store.query_message("T", "tx", 4, 0, 2**62).messages) == 1


def test_delayed_message_unit_holds_the_delivery_time(open_small: StoreFactory) -> None:
    store = open_small()
    result = put_ok(
        store, msg(topic=SCHEDULE_TOPIC, queue_id=1, tags="t", properties={"DELAY": "2"})
    )
    cq = store.find_consume_queue(SCHEDULE_TOPIC, 1)
    assert cq is not None
    unit = cq.unit(0)
    assert unit == (result.phy_offset, result.wrote_bytes, result.store_timestamp + 5000)
    clamped = put_ok(store, msg(topic=SCHEDULE_TOPIC, queue_id=17, properties={"DELAY": "99"}))
    unit = store.find_consume_queue(SCHEDULE_TOPIC, 17).unit(0)  # type: ignore[union-attr]
    assert unit is not None
    assert unit[2] == clamped.store_timestamp + 2 * 3_600_000  # the last level: 2h
    put_ok(store, msg(topic=SCHEDULE_TOPIC, queue_id=3, tags="t", properties={"DELAY": "x"}))
    unit = store.find_consume_queue(SCHEDULE_TOPIC, 3).unit(0)  # type: ignore[union-attr]
    assert unit is not None
    assert unit[2] == tags_code("t")
    # Outside the schedule topic DELAY does not change the tag hash.
    put_ok(store, msg(topic="Plain", tags="t", properties={"DELAY": "2"}))
    unit = store.find_consume_queue("Plain", 0).unit(0)  # type: ignore[union-attr]
    assert unit is not None
    assert unit[2] == tags_code("t")


def test_sync_flush_put_returns_once_durable(open_small: StoreFactory) -> None:
    store = open_small(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    result = put(store, msg())
    assert result.status is PutStatus.PUT_OK
    assert store.commitlog.mfq.flushed_where >= result.next_offset
    assert put_batch(store, [msg(), msg()]).status is PutStatus.PUT_OK


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"topic": "T\udc80"}, "topic is not valid Unicode"),
        ({"properties": {"k": "\udc80"}}, "properties are not valid Unicode"),
        ({"topic": ""}, "topic must be 1.."),
    ],
)
def test_unencodable_or_empty_names_are_illegal(
    open_small: StoreFactory, changes: dict[str, object], detail: str
) -> None:
    store = open_small()
    message = msg()
    for name, value in changes.items():
        setattr(message, name, value)
    result = put(store, message)
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert detail in result.detail
    assert store.max_phy_offset() == 0
