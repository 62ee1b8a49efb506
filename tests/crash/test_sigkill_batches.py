"""SIGKILL a writer of large batches, the puts the CommitLog writes with two pwrites (every
byte but the first record's size, then the size; see store/commitlog.py), then recover the store
and check it: whole batches or none, every acknowledged one present, nothing else in the log.

One kill lands between the two pwrites of a chosen put (through crash_child.py): the records
are in the file, their first size is not, and recovery must end the log where that put began.
The other lands after a random number of acknowledgements. test_sigkill.py covers one-message
puts, which are copied into the mapping.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from pathlib import Path

import pytest
from crash_helpers import (
    QUEUES,
    SIZE,
    TOPICS,
    BenchProcess,
    bench_args,
    crash_child_argv,
    crash_seed,
    message_index,
    opened_store,
    pocketmq_argv,
    verify_with_inspect,
    write_broker_conf,
)

from pocketmq.protocol.record_codec import decode_message
from pocketmq.store.bench import bench_body, bench_message, bench_topic
from pocketmq.store.commitlog import PWRITE_MIN
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetStatus

pytestmark = [pytest.mark.crash]

BATCH = 128
# The bench's records are ~680 bytes: a batch must be a pwrite put.
assert BATCH * SIZE >= PWRITE_MIN


def run_killed(tmp_path: Path, faults: list[str]) -> tuple[Path, Path, int, str]:
    """Run the batched bench, kill it (by the faults, or after a random number of batches
    acknowledged and a random moment), and return the store, its conf, the acknowledged count
    and a context for messages."""
    seed = crash_seed()
    rng = random.Random(seed)
    conf = write_broker_conf(tmp_path)
    store_dir = tmp_path / "store"
    args = [*bench_args(store_dir, conf, "async", 1), "--batch", str(BATCH)]
    argv = crash_child_argv(faults, args) if faults else pocketmq_argv(*args)
    with BenchProcess(argv) as bench:
        if faults:
            bench.finish()  # the fault kills it
            when = " ".join(faults)
        else:
            threshold = rng.randint(1, 40) * BATCH
            bench.wait_for_acked(threshold)
            delay_s = rng.uniform(0, 0.05)
            time.sleep(delay_s)  # deliberate: land anywhere between two progress lines
            when = f"{delay_s * 1000:.0f} ms after acked >= {threshold}"
        bench.kill()
        status = bench.finish()
        ctx = f"seed={seed} batches of {BATCH}, killed {when}, acked={bench.last_acked}"
        assert status == -signal.SIGKILL, f"{ctx}: the bench was not killed\n{bench.describe()}"
        return store_dir, conf, bench.last_acked, ctx


def read_batches(store: MessageStore, ctx: str) -> dict[int, tuple[str, int, int]]:
    """Every record in the queues, checked (CRC, body, the queue of its batch, contiguous
    offsets): bench index -> (topic, queue id, queue offset)."""
    where: dict[int, tuple[str, int, int]] = {}
    for topic in store.topics():
        for qid in sorted(store.consume_queue_table[topic]):
            end = store.get_max_offset_in_queue(topic, qid)
            offset = 0
            while offset < end:
                got = store.get_message(topic, qid, offset, 32)
                assert got.status is GetStatus.FOUND, f"{ctx}: {topic}/{qid} at {offset}"
                assert got.queue_offsets[0] == offset, f"{ctx}: {topic}/{qid} skips {offset}"
                for qo, raw in zip(got.queue_offsets, got.messages, strict=True):
                    here = f"{ctx}: {topic}/{qid} offset {qo}"
                    msg = decode_message(raw, check_crc=True)
                    i = message_index(msg, here)
                    assert (msg.topic, msg.queue_id) == bench_topic(i // BATCH, TOPICS, QUEUES)
                    assert msg.body == bench_body(i, SIZE), f"{here}: body of {i} differs"
                    assert i not in where, f"{here}: message {i} stored twice"
                    where[i] = (topic, qid, qo)
                offset = got.next_begin_offset
    return where


def check_recovered(store_dir: Path, conf: Path, acked: int, ctx: str) -> int:
    """Recover and check the store; returns how many messages it holds (whole batches)."""
    with opened_store(store_dir, conf):
        pass  # open() recovers: abnormally, after a kill
    report = verify_with_inspect(store_dir, conf, ctx)
    with opened_store(store_dir, conf) as store:
        where = read_batches(store, ctx)
        held = len(where)
        assert sorted(where) == list(range(held)), f"{ctx}: not a prefix of the messages"
        assert held % BATCH == 0 and held >= acked, f"{ctx}: {held} messages held"
        assert report["records"] == held, f"{ctx}: {report['records']} records in the log"
        # A new batch continues its queue where the recovered one ends.
        news = [bench_message(held + k, SIZE, TOPICS, QUEUES, held // BATCH) for k in range(4)]
        topic, qid = news[0].topic, news[0].queue_id
        end = store.get_max_offset_in_queue(topic, qid)
        result = asyncio.run(store.put_messages(news))
        assert result.ok and result.queue_offset == end, f"{ctx}: new batch {result}"
    with opened_store(store_dir, conf) as store:
        assert store.get_max_offset_in_queue(topic, qid) == end + len(news), ctx
    return held


@pytest.mark.parametrize("put", [1, 7, 13])
def test_kill_between_the_two_pwrites_of_a_batch(tmp_path: Path, put: int) -> None:
    # Calls 2k-1 and 2k of MappedFile.write are the k-th put's records and its size. Twelve
    # batches fill the first 1 MiB segment: put 13 is the second segment's first.
    faults = ["--kill-before", "pocketmq.store.mapped_file:MappedFile.write"]
    faults += ["--kill-call", str(2 * put)]
    store_dir, conf, acked, ctx = run_killed(tmp_path, faults)
    assert check_recovered(store_dir, conf, acked, ctx) == (put - 1) * BATCH, ctx


@pytest.mark.slow
@pytest.mark.parametrize("repeat", range(2))
def test_kill_after_random_acked_batches(tmp_path: Path, repeat: int) -> None:
    store_dir, conf, acked, ctx = run_killed(tmp_path, [])
    check_recovered(store_dir, conf, acked, ctx)
