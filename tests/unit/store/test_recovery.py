"""Recovery by file surgery (all in-process): open a store, write, close it, damage its files,
reopen. Also retention and the disk-full refusal."""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from store_helpers import (
    StoreFactory,
    msg,
    put,
    put_batch,
    put_ok,
    read_queue,
    segment_paths,
)

from pocketmq.clock import FakeClock
from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import GetStatus, MessageStore, PutResult, PutStatus

SEGMENT = 4096
CQ_FILE = 200
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


def segment_path(root: Path, phy_offset: int) -> Path:
    return root / "commitlog" / f"{phy_offset - phy_offset % SEGMENT:020d}"


def commitlog_names(root: Path) -> list[str]:
    return [p.name for p in segment_paths(root)]


def body_of(i: int) -> bytes:
    return f"{i:04d}".encode() * (40 + i % 5 * 10)


def fill_queue(store: MessageStore, count: int, topic: str = "T") -> list[PutResult]:
    """count messages in topic/0, each with a unique key and a body of varying size."""
    return [put_ok(store, msg(topic, body_of(i), keys=f"key{i}")) for i in range(count)]


def fill_mixed(store: MessageStore) -> tuple[list[tuple[str, int]], list[tuple[str, str]]]:
    """Several topics and queues, tags, keys, a batch, a prepared and a delayed message."""
    for i in range(45):
        props = {"UNIQ_KEY": f"U{i:03d}"}
        put_ok(
            store,
            msg(
                "A",
                b"a" * (100 + i * 5),
                queue_id=i % 3,
                tags=f"t{i % 4}",
                keys=f"ka{i} shared",
                properties=props,
            ),
        )
        if i % 5 == 0:
            put_ok(store, msg("B", f"b{i}".encode() * 30, keys=f"kb{i}"))
    put_ok(store, msg("A", b"prepared", sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE, keys="tx1"))
    assert put_batch(
        store, [msg("C", f"c{i}".encode(), queue_id=1, keys=f"kc{i}") for i in range(7)]
    ).ok
    put_ok(store, msg(SCHEDULE_TOPIC, b"later", queue_id=2, properties={"DELAY": "3"}))
    queues = [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("C", 1), (SCHEDULE_TOPIC, 2)]
    keys = [
        ("A", "ka0"),
        ("A", "ka44"),
        ("A", "shared"),
        ("A", "U007"),
        ("A", "tx1"),
        ("B", "kb40"),
        ("C", "kc6"),
        ("A", "nothing"),
    ]
    assert len(commitlog_names(store.root)) >= 4
    return queues, keys


def snapshot(
    store: MessageStore, queues: list[tuple[str, int]], keys: list[tuple[str, str]]
) -> dict[Any, Any]:
    state: dict[Any, Any] = {"max_phy": store.max_phy_offset()}
    for topic, qid in queues:
        cq = store.find_consume_queue(topic, qid)
        assert cq is not None
        state[topic, qid] = (
            store.get_min_offset_in_queue(topic, qid),
            store.get_max_offset_in_queue(topic, qid),
            read_queue(store, topic, qid),
            list(cq.iter_units(cq.min_offset_in_queue())),
        )
    for topic, key in keys:
        found = store.query_message(topic, key, 100, 0, 2**62).messages
        state["query", topic, key] = sorted(found)
    return state


def remove_derived_files(root: Path) -> None:
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    (root / "checkpoint").unlink()


# --- rebuild ---------------------------------------------------------------------------------


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort-marker"])
def test_rebuild_queues_and_index_from_the_commitlog(
    open_small: StoreFactory, store_root: Path, abort: bool
) -> None:
    store = open_small()
    queues, keys = fill_mixed(store)
    before = snapshot(store, queues, keys)
    assert before["query", "A", "shared"] and not before["query", "A", "nothing"]
    assert len(before["query", "A", "tx1"]) == 1
    store.close()

    remove_derived_files(store_root)
    if abort:
        (store_root / "abort").touch()
    again = open_small()
    assert again.last_exit_ok is not abort
    assert snapshot(again, queues, keys) == before
    assert again.find_consume_queue("A", 0) is not None
    # The prepared message went to no queue, now as before.
    assert sum(before["A", q][1] for q in range(3)) == 45
    assert put_ok(again, msg("C", queue_id=1)).queue_offset == 7
    assert put_ok(again, msg("A", queue_id=2)).queue_offset == 15


def test_stale_abort_marker_keeps_the_same_state(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    queues, keys = fill_mixed(store)
    before = snapshot(store, queues, keys)
    store.close()
    (store_root / "abort").touch()
    again = open_small()
    assert not again.last_exit_ok
    assert snapshot(again, queues, keys) == before
    assert (store_root / "abort").exists()  # present while running
    again.close()
    assert not (store_root / "abort").exists()


def test_abnormal_recovery_redispatches_from_the_checkpoint(
    open_small: StoreFactory, store_root: Path, clock: FakeClock
) -> None:
    store = open_small(clock=clock)
    for i in range(40):
        clock.advance(1000)  # records one second apart, so the checkpoint picks a segment
        put_ok(store, msg(body=b"x" * 300, keys=f"k{i}"))
    keys = [("T", "k0"), ("T", "k38"), ("T", "k39")]
    before = snapshot(store, [("T", 0)], keys)
    store.close()
    physic_ts, logics_ts = struct.unpack_from(">qq", (store_root / "checkpoint").read_bytes())
    assert physic_ts == logics_ts == clock.now_ms()
    # The last three consume-queue units never reached the disk before the crash.
    cq_last = sorted((store_root / "consumequeue" / "T" / "0").iterdir())[-1]
    os.truncate(cq_last, 7 * 20)
    (store_root / "abort").touch()

    again = open_small()
    assert not again.last_exit_ok
    assert snapshot(again, [("T", 0)], keys) == before
    start = again.commitlog.abnormal_start_index(min(physic_ts, logics_ts) - 3000)
    assert start > 0  # dispatch started past the first segment, as the checkpoint allowed
    assert put_ok(again, msg()).queue_offset == 40


def test_a_crash_right_after_an_index_roll_indexes_nothing_twice(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small(max_index_num=17)  # 16 entries per index file
    for i in range(16):
        put_ok(store, msg(body=b"x" * 300, keys=f"k{i}"))
    assert store.index.files[-1].is_full()
    # The next key rolls the index over; the crash comes before that key is in the new file.
    store.index._writable()
    index_dir = store_root / "index"
    before = {p.name: p.read_bytes() for p in index_dir.iterdir()}
    store.close()
    (store_root / "abort").touch()

    again = open_small(max_index_num=17)
    assert not again.last_exit_ok
    # Abnormal recovery dispatched every record again: none went into the empty new file.
    assert {p.name: p.read_bytes() for p in index_dir.iterdir()} == before
    for i in range(16):
        assert len(again.query_message("T", f"k{i}", 4, 0, 2**62).messages) == 1
    put_ok(again, msg(keys="k16"))
    assert len(again.query_message("T", "k16", 4, 0, 2**62).messages) == 1
    assert again.index.files[-1].index_count == 2


# --- torn tails ------------------------------------------------------------------------------


def test_torn_tail_is_cut(open_small: StoreFactory, store_root: Path) -> None:
    store = open_small()
    results = fill_queue(store, 30)
    store.close()
    last = results[-1]
    path = segment_path(store_root, last.phy_offset)
    assert path.name == commitlog_names(store_root)[-1]
    os.truncate(path, last.phy_offset % SEGMENT + last.wrote_bytes // 2)

    again = open_small()
    assert path.stat().st_size == SEGMENT  # extended back with zeros
    assert again.max_phy_offset() == last.phy_offset
    assert again.get_max_offset_in_queue("T", 0) == 29
    bodies = [decode_message(r).body for r in read_queue(again, "T", 0)]
    assert bodies == [body_of(i) for i in range(29)]
    assert again.look_message_by_offset(last.phy_offset) is None
    assert again.query_message("T", "key29", 4, 0, 2**62).messages == []
    assert len(again.query_message("T", "key28", 4, 0, 2**62).messages) == 1
    got = again.get_message("T", 0, 29, 4)
    assert got.status is GetStatus.OFFSET_OVERFLOW_ONE
    # The consume-queue unit past the cut is gone from the file, not only hidden.
    cq_file = store_root / "consumequeue" / "T" / "0" / f"{29 * 20 // CQ_FILE * CQ_FILE:020d}"
    unit_pos = 29 * 20 % CQ_FILE
    assert cq_file.read_bytes()[unit_pos : unit_pos + 20] == bytes(20)

    new = put_ok(again, msg(body=b"after the cut"))
    assert (new.phy_offset, new.queue_offset) == (last.phy_offset, 29)
    assert decode_message(again.get_message("T", 0, 29, 1).messages[0]).body == b"after the cut"


@pytest.mark.parametrize("damage", ["truncate", "zero-size"])
def test_rewriting_after_a_cut_does_not_resurrect_old_records(
    open_small: StoreFactory, store_root: Path, damage: str
) -> None:
    store = open_small()
    # Equal-size records, so that a rewrite lines up exactly with the old record boundaries.
    results = [
        put_ok(store, msg(body=f"old{i:03d}".encode() * 20, keys=f"old{i:02d}")) for i in range(12)
    ]
    store.close()
    cut = results[6]
    path = segment_path(store_root, cut.phy_offset)
    assert path == segment_path(store_root, results[-1].phy_offset)
    pos = cut.phy_offset % SEGMENT
    if damage == "truncate":
        os.truncate(path, pos + 10)
    else:
        # A torn append: the size field (written last) never made it; the rest of the record
        # and every later record are still in the file.
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(bytes(4))

    again = open_small()
    assert again.max_phy_offset() == cut.phy_offset
    assert again.get_max_offset_in_queue("T", 0) == 6
    new = put_ok(again, msg(body=b"new-000-" * 15, keys="new06"))
    assert new.wrote_bytes == cut.wrote_bytes
    assert (new.phy_offset, new.queue_offset) == (cut.phy_offset, 6)
    again.close()

    third = open_small()
    assert third.max_phy_offset() == cut.phy_offset + cut.wrote_bytes
    assert third.get_max_offset_in_queue("T", 0) == 7
    bodies = [decode_message(r).body for r in read_queue(third, "T", 0)]
    assert bodies == [f"old{i:03d}".encode() * 20 for i in range(6)] + [b"new-000-" * 15]
    assert third.look_message_by_offset(results[7].phy_offset) is None
    assert third.query_message("T", "old08", 4, 0, 2**62).messages == []
    assert len(third.query_message("T", "new06", 4, 0, 2**62).messages) == 1
    assert put_ok(third, msg()).queue_offset == 7


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
def test_corrupted_body_cuts_the_log_there(
    open_small: StoreFactory, store_root: Path, abort: bool
) -> None:
    store = open_small()
    results = fill_queue(store, 36)
    store.close()
    names = commitlog_names(store_root)
    assert len(names) >= 3
    # A record inside the second-last segment (normal recovery checks the last three).
    inside = [i for i, r in enumerate(results) if r.phy_offset // SEGMENT == len(names) - 2]
    k = inside[len(inside) // 2]
    victim = results[k]
    path = segment_path(store_root, victim.phy_offset)
    body_pos = victim.phy_offset % SEGMENT + 88 + 3
    data = bytearray(path.read_bytes())
    data[body_pos] ^= 0x55
    path.write_bytes(data)
    if abort:
        (store_root / "abort").touch()

    again = open_small()
    assert again.max_phy_offset() == victim.phy_offset
    assert commitlog_names(store_root) == names[:-1]
    assert again.get_max_offset_in_queue("T", 0) == k
    assert len(read_queue(again, "T", 0)) == k
    assert again.look_message_by_offset(victim.phy_offset) is None
    assert again.look_message_by_offset(results[-1].phy_offset) is None
    assert len(again.query_message("T", f"key{k - 1}", 4, 0, 2**62).messages) == 1
    for i in (k, k + 1, 35):
        assert again.query_message("T", f"key{i}", 4, 0, 2**62).messages == []
    new = put_ok(again, msg())
    assert (new.phy_offset, new.queue_offset) == (victim.phy_offset, k)


def test_corrupted_body_is_kept_without_crc_checks(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small(check_crc_on_recover=False)
    results = fill_queue(store, 5)
    store.close()
    path = segment_path(store_root, 0)
    data = bytearray(path.read_bytes())
    data[results[2].phy_offset + 90] ^= 0x55
    path.write_bytes(data)
    again = open_small(check_crc_on_recover=False)
    assert again.max_phy_offset() == results[-1].next_offset
    assert again.get_max_offset_in_queue("T", 0) == 5


@pytest.mark.parametrize("how", ["truncate-at-a-record", "delete-last-segment"])
def test_queue_units_beyond_the_commitlog_are_dropped(
    open_small: StoreFactory, store_root: Path, how: str
) -> None:
    store = open_small()
    results = fill_queue(store, 36)
    store.close()
    names = commitlog_names(store_root)
    if how == "delete-last-segment":
        (store_root / "commitlog" / names[-1]).unlink()
        end = int(names[-1])
        kept = sum(1 for r in results if r.phy_offset < end)
        cut = end
    else:
        kept = 20
        cut = results[kept].phy_offset
        os.truncate(segment_path(store_root, cut), cut % SEGMENT)
    again = open_small()
    assert again.max_phy_offset() == cut
    assert again.get_max_offset_in_queue("T", 0) == kept
    cq = again.find_consume_queue("T", 0)
    assert cq is not None
    units = list(cq.iter_units(0))
    assert len(units) == kept
    assert all(phy + size <= cut for _, phy, size, _ in units)
    cq_bytes = b"".join(p.read_bytes() for p in sorted(cq.mfq.directory.iterdir()))
    assert cq_bytes[kept * 20 :] == bytes(len(cq_bytes) - kept * 20)
    assert len(read_queue(again, "T", 0)) == kept
    assert put_ok(again, msg()).queue_offset == kept


def test_empty_queue_after_the_log_is_cut_to_nothing(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    put_ok(store, msg())
    store.close()
    os.truncate(segment_path(store_root, 0), 0)
    again = open_small()
    assert again.max_phy_offset() == 0
    got = again.get_message("T", 0, 0, 1)
    assert (got.status, got.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    assert put_ok(again, msg()).queue_offset == 0


# --- retention -------------------------------------------------------------------------------


def _age(paths: list[Path], seconds_ago: int) -> None:
    t = time.time() - seconds_ago
    for p in paths:
        os.utime(p, (t, t))


def test_retention_deletes_old_segments_queue_files_and_index_files(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small(file_reserved_time=1, delete_when=EVERY_HOUR, max_index_num=9)
    results = fill_queue(store, 70)
    store.commitlog.flush()
    names = commitlog_names(store_root)
    assert len(names) >= 6
    index_before = sorted(p.name for p in (store_root / "index").iterdir())
    cq_before = sorted(p.name for p in (store_root / "consumequeue" / "T" / "0").iterdir())
    assert len(index_before) >= 8 and len(cq_before) == 7

    segments = [store_root / "commitlog" / n for n in names]
    _age(segments[:3], 2 * 3600)
    assert store.run_retention() == 3
    assert commitlog_names(store_root) == names[3:]
    first = int(names[3])
    assert store.min_phy_offset() == first

    min_q = store.get_min_offset_in_queue("T", 0)
    assert min_q == next(i for i, r in enumerate(results) if r.phy_offset >= first)
    got = store.get_message("T", 0, 0, 10)
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, min_q)
    assert store.get_message("T", 0, min_q, 1).queue_offsets == [min_q]
    assert store.get_earliest_message_time("T", 0) == results[min_q].store_timestamp
    cq_after = sorted(p.name for p in (store_root / "consumequeue" / "T" / "0").iterdir())
    assert cq_after == [n for n in cq_before if int(n) >= min_q * 20 // CQ_FILE * CQ_FILE]
    assert len(cq_after) < len(cq_before)
    index_after = sorted(p.name for p in (store_root / "index").iterdir())
    assert index_after == index_before[len(index_before) - len(index_after) :]
    assert len(index_after) < len(index_before)
    assert store.query_message("T", "key0", 4, 0, 2**62).messages == []
    assert len(store.query_message("T", "key69", 4, 0, 2**62).messages) == 1

    # Everything old: every segment goes but the last one, which is still being written.
    _age([store_root / "commitlog" / n for n in commitlog_names(store_root)], 2 * 3600)
    store.run_retention()
    assert commitlog_names(store_root) == names[-1:]
    assert store.get_max_offset_in_queue("T", 0) == 70
    new = put_ok(store, msg())
    assert new.queue_offset == 70
    assert store.get_message("T", 0, 70, 1).status is GetStatus.FOUND

    store.close()
    again = open_small(file_reserved_time=1, delete_when=EVERY_HOUR, max_index_num=9)
    assert again.min_phy_offset() == int(names[-1])
    assert again.get_min_offset_in_queue("T", 0) >= min_q
    assert again.get_message("T", 0, 0, 1).status is GetStatus.OFFSET_TOO_SMALL


def test_retention_waits_for_the_delete_hour_and_expiry(
    open_small: StoreFactory, store_root: Path
) -> None:
    now_ms = int(time.time() * 1000)
    other_hour = (time.localtime(now_ms / 1000).tm_hour + 1) % 24
    store = open_small(
        clock=FakeClock(now_ms), file_reserved_time=1, delete_when=f"{other_hour:02d}"
    )
    fill_queue(store, 30)
    store.commitlog.flush()
    names = commitlog_names(store_root)
    _age([store_root / "commitlog" / n for n in names], 2 * 3600)
    assert store.run_retention() == 0  # not the hour, disk not short
    assert commitlog_names(store_root) == names

    store.config = store.config.replace(delete_when=EVERY_HOUR)
    _age([store_root / "commitlog" / n for n in names], 60)  # expired? not yet: kept 1 hour
    assert store.run_retention() == 0


def test_retention_deletes_forcibly_when_the_disk_is_short(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()  # 72 h reserved, deletes at 04:00 only
    fill_queue(store, 30)
    store.commitlog.flush()
    names = commitlog_names(store_root)
    store.disk_usage = lambda _path: (88, 100)  # past the forcible clean ratio (85)
    assert store.run_retention() == 1
    assert commitlog_names(store_root) == names[1:]


# --- disk full --------------------------------------------------------------------------------


def test_disk_full_refuses_writes_until_space_is_back(open_small: StoreFactory) -> None:
    store = open_small()
    put_ok(store, msg())
    before = store.max_phy_offset()
    store.disk_usage = lambda _path: (95, 100)
    store.check_disk()
    result = put(store, msg())
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk" in result.detail
    assert put_batch(store, [msg(), msg()]).status is PutStatus.SERVICE_NOT_AVAILABLE
    assert store.max_phy_offset() == before
    assert store.get_max_offset_in_queue("T", 0) == 1
    assert store.get_message("T", 0, 0, 1).status is GetStatus.FOUND  # reads still work

    store.disk_usage = lambda _path: (50, 100)
    store.check_disk()
    assert put_ok(store, msg()).queue_offset == 1


def test_one_append_of_several_queues_is_all_or_nothing(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    put_ok(store, msg("A", b"a0"))
    # A transaction's commit and op: records of two queues in one append, each queue counting
    # its own offsets (a queue met again in the same append goes on where it was).
    both = put_batch(store, [msg("A", b"a1"), msg("B", b"b0", queue_id=1), msg("A", b"a2")])
    assert both.ok and both.queue_offset == 1
    assert [decode_message(r).body for r in read_queue(store, "A", 0)] == [b"a0", b"a1", b"a2"]
    assert [decode_message(r).queue_offset for r in read_queue(store, "B", 1)] == [0]
    last = put_batch(store, [msg("A", b"a3"), msg("B", b"b1", queue_id=1)])
    store.close()
    # Killed before the append's last write, the first record's size: nothing of it is kept.
    with open(segment_path(store_root, last.phy_offset), "r+b") as f:
        f.seek(last.phy_offset % SEGMENT)
        f.write(bytes(4))

    again = open_small()
    assert again.get_max_offset_in_queue("A", 0) == 3
    assert again.get_max_offset_in_queue("B", 1) == 1
    assert again.look_message_by_offset(last.phy_offsets[1]) is None
    assert again.max_phy_offset() == last.phy_offset
