"""A slave's store appends what its master replicated: byte for byte, at the same offsets,
dispatched to consume queues and the index as the master's own appends are."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from store_helpers import msg, open_store, put_ok, read_queue, segment_paths, small_config

from pocketmq.clock import FakeClock
from pocketmq.errors import StoreWriteError
from pocketmq.store.commitlog import PWRITE_MIN
from pocketmq.store.config import BrokerRole
from pocketmq.store.message_store import MessageStore

BATCH = 1000  # a frame's most bytes: not a multiple of any record size


def fill(store: MessageStore, count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(count):
        body = bytes([i % 251]) * rng.randint(1, 600)
        put_ok(store, msg(f"T{i % 3}", body, queue_id=i % 2, keys=f"k{i}"))


def replicate(
    master: MessageStore, slave: MessageStore, batch: int = BATCH, until: int | None = None
) -> int:
    """Copy the master's log (up to ``until``) into the slave as the HA writer cuts it:
    frames of at most ``batch`` bytes, never past a segment's end. Returns the frames."""
    frames = 0
    end = master.max_phy_offset() if until is None else until
    while (start := slave.max_phy_offset()) < end:
        if start == 0:
            top = master.max_phy_offset()
            start = top - top % master.config.mapped_file_size_commit_log
        mf = master.commitlog.mfq.find(start)
        assert mf is not None
        pos = start - mf.file_from_offset
        size = min(mf.wrote_position - pos, batch, end - start)
        slave.append_replica(start, memoryview(mf.read(pos, size)))
        frames += 1
    return frames


def assert_same_queues(master: MessageStore, slave: MessageStore) -> None:
    """Every queue fill() writes reads the same on the slave as on the master."""
    for topic in ("T0", "T1", "T2"):
        for qid in (0, 1):
            assert read_queue(slave, topic, qid) == read_queue(master, topic, qid)


def assert_same_segments(tmp_path: Path) -> None:
    """The slave's CommitLog segments (closed stores) are the master's, byte for byte."""
    masters = segment_paths(tmp_path / "master")
    slaves = segment_paths(tmp_path / "slave")
    assert [p.name for p in slaves] == [p.name for p in masters]
    for m, s in zip(masters, slaves, strict=True):
        assert s.read_bytes() == m.read_bytes(), s.name


def open_pair(tmp_path: Path, clock: FakeClock) -> tuple[MessageStore, MessageStore]:
    master = open_store(small_config(tmp_path / "master"), clock)
    slave = open_store(small_config(tmp_path / "slave", broker_role=BrokerRole.SLAVE), clock)
    return master, slave


def test_slave_log_is_the_masters_byte_for_byte(tmp_path: Path, clock: FakeClock) -> None:
    master, slave = open_pair(tmp_path, clock)
    try:
        put_ok(master, msg("T0", b"first"))
        # An empty slave starts at the master's last segment; here that is the first.
        assert replicate(master, slave) == 1
        fill(master, 60)
        assert len(segment_paths(tmp_path / "master")) > 3  # several segments rolled
        replicate(master, slave)
        assert slave.max_phy_offset() == master.max_phy_offset()
        assert_same_queues(master, slave)
        assert slave.query_message("T1", "k4", 5, 0, 2**62).messages == (
            master.query_message("T1", "k4", 5, 0, 2**62).messages
        )
        # A slave's next queue offsets follow what it replicated (for a promotion).
        assert slave.commitlog.topic_queue_table == master.commitlog.topic_queue_table
    finally:
        master.close()
        slave.close()
    assert_same_segments(tmp_path)


def test_an_empty_slave_starts_at_the_masters_last_segment(
    tmp_path: Path, clock: FakeClock
) -> None:
    master, slave = open_pair(tmp_path, clock)
    try:
        fill(master, 40)
        last = master.commitlog.mfq.last()
        assert last is not None and last.file_from_offset > 0
        replicate(master, slave)
        assert slave.min_phy_offset() == last.file_from_offset
        assert slave.max_phy_offset() == master.max_phy_offset()
        # Its queues begin where its log does; what is there reads as on the master.
        queue = read_queue(slave, "T1", 0, slave.get_min_offset_in_queue("T1", 0))
        assert queue
        assert queue == read_queue(master, "T1", 0, slave.get_min_offset_in_queue("T1", 0))
    finally:
        master.close()
        slave.close()


def test_bytes_that_do_not_continue_the_log_are_refused(tmp_path: Path, clock: FakeClock) -> None:
    master, slave = open_pair(tmp_path, clock)
    try:
        fill(master, 12)
        replicate(master, slave, batch=300)
        end = slave.max_phy_offset()
        with pytest.raises(StoreWriteError, match="log ends at"):
            slave.append_replica(end + 1, memoryview(b"x"))
        size = slave.config.mapped_file_size_commit_log
        with pytest.raises(StoreWriteError, match="past the segment end"):
            slave.append_replica(end, memoryview(bytes(size)))
        assert slave.max_phy_offset() == end
    finally:
        master.close()
        slave.close()


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "crash"])
def test_a_slave_stopped_mid_record_recovers_to_the_last_whole_record(
    tmp_path: Path, clock: FakeClock, abort: bool
) -> None:
    master, slave = open_pair(tmp_path, clock)
    put_ok(master, msg("T0", b"first"))
    replicate(master, slave)  # from offset 0 on
    fill(master, 20)
    whole = put_ok(master, msg("T1", b"z" * 300, queue_id=1)).phy_offset
    replicate(master, slave, batch=333, until=whole)
    assert slave.max_phy_offset() == whole
    # Half of the next record arrived; dispatch waits for the rest, quietly.
    replicate(master, slave, until=whole + 200)
    queued = slave.get_max_offset_in_queue("T1", 1)
    assert queued == master.get_max_offset_in_queue("T1", 1) - 1
    slave.close()
    if abort:
        (tmp_path / "slave" / "abort").touch()
    again = open_store(small_config(tmp_path / "slave", broker_role=BrokerRole.SLAVE), clock)
    try:
        assert again.last_exit_ok is not abort
        assert again.max_phy_offset() == whole
        assert again.get_max_offset_in_queue("T1", 1) == queued
        replicate(master, again)
        assert read_queue(again, "T1", 1) == read_queue(master, "T1", 1)
    finally:
        again.close()
        master.close()


def _dispatched_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("consumequeue", "index")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def test_consume_queues_and_index_are_the_masters_byte_for_byte(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The master dispatches what its puts built, the slave what it decodes from replicated
    bytes: the same files, index files rolled over and slot chains with collisions included."""
    master, slave = open_pair(tmp_path, clock)
    try:
        put_ok(master, msg("T0", b"first"))
        replicate(master, slave)  # the slave starts at the first segment
        for i in range(150):
            keys = " ".join(f"k{i}-{j}" for j in range(i % 3))
            m = msg(f"T{i % 3}", b"x" * (i % 40), queue_id=i % 2, keys=keys or None)
            m.properties["UNIQ_KEY"] = f"U{i:04d}"
            put_ok(master, m)
        replicate(master, slave)
        assert len(master.index.files) > 2
    finally:
        master.close()
        slave.close()
    masters = _dispatched_files(tmp_path / "master")
    assert any(name.startswith("index") for name in masters)
    assert _dispatched_files(tmp_path / "slave") == masters


def test_large_frames_are_written_with_pwrite_byte_for_byte(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Frames of a haTransferBatchSize of at least PWRITE_MIN take the pwrite path (see
    CommitLog), small ones after them the mapping's copy: the slave's log is the master's."""
    sizes = {"mapped_file_size_commit_log": 8 * PWRITE_MIN, "max_message_size": 4 * PWRITE_MIN}
    master = open_store(small_config(tmp_path / "master", **sizes), clock)
    slave = open_store(
        small_config(tmp_path / "slave", broker_role=BrokerRole.SLAVE, **sizes), clock
    )
    try:
        put_ok(master, msg("T0", b"first"))
        replicate(master, slave)
        for i in range(40):
            put_ok(master, msg(f"T{i % 3}", bytes([i]) * 9000, queue_id=i % 2, keys=f"k{i}"))
        assert replicate(master, slave, batch=2 * PWRITE_MIN) < 10  # a few large frames
        assert not slave.commitlog.mfq.prefaulting
        fill(master, 30)
        replicate(master, slave)
        assert slave.commitlog.mfq.prefaulting
        assert_same_queues(master, slave)
    finally:
        master.close()
        slave.close()
    assert_same_segments(tmp_path)
