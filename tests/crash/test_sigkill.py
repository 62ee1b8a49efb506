"""SIGKILL the bench writer at random moments, then recover the store and check it.

The child is ``pocketmq store bench --progress``; its ``{"acked": N}`` lines say that messages
0..N-1 were acknowledged. After the kill the test process opens the store (abnormal
recovery), runs ``store inspect --verify``, and checks that every acknowledged message is in its
queue and found by key, that queue offsets have no gap, that no partial or foreign record is
visible, and that new puts continue each queue at its max offset.

The kill comes after a random number of acknowledgements, at the first progress line, after a
random sleep without reading, or (through crash_child.py) at a chosen call inside the store:
in the middle of an index insert, a window a random kill rarely hits.

What this covers, and what it does not: SIGKILL ends the process, not the machine. Everything
the process wrote into its mappings is already in the page cache and reaches the disk anyway,
so acknowledged messages must survive under ASYNC_FLUSH as much as under SYNC_FLUSH. Power loss
(losing the page cache) is only survivable for SYNC_FLUSH, which fsyncs before acknowledging;
these tests do not simulate it.

Each test draws a fresh seed (set POCKETMQ_CRASH_SEED to replay one); every assertion message
starts with it. Timing still varies between runs, so a replay is close, not identical.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from crash_helpers import (
    BenchProcess,
    bench_args,
    check_recovered_store,
    crash_child_argv,
    crash_seed,
    pocketmq_argv,
    write_broker_conf,
)

from pocketmq.protocol import native

pytestmark = [pytest.mark.crash]

MODES = [
    pytest.param("async", 1, id="async-1writer"),
    pytest.param("sync", 16, id="sync-16writers"),
]
# Upper bounds for the random thresholds: about a second of writing in either mode, which
# rolls every kind of file several times (see crash_helpers.BROKER_CONF).
MAX_THRESHOLD = {"async": 15_000, "sync": 5_000}

# Chooses when to kill: reads (or not) the child's output, returns a description for messages.
KillPlan = Callable[[BenchProcess, random.Random, str], str]


def kill_and_check(
    tmp_path: Path, flush: str, writers: int, plan: KillPlan, child_faults: Sequence[str] = ()
) -> None:
    """Run the bench (under crash_child.py when faults are given), let plan pick the moment,
    SIGKILL it and check the recovered store."""
    seed = crash_seed()
    rng = random.Random(seed)
    conf = write_broker_conf(tmp_path)
    store_dir = tmp_path / "store"
    args = bench_args(store_dir, conf, flush, writers)
    argv = crash_child_argv(child_faults, args) if child_faults else pocketmq_argv(*args)
    with BenchProcess(argv) as bench:
        when = plan(bench, rng, flush)
        bench.kill()
        status = bench.finish()
        acked = bench.last_acked  # the last line the child printed before it died
        ctx = f"seed={seed} flush={flush} writers={writers} killed {when}, acked={acked}"
        assert status == -signal.SIGKILL, f"{ctx}: the bench was not killed\n{bench.describe()}"
    check_recovered_store(store_dir, conf, acked, writers == 1, ctx)


def after_threshold(bench: BenchProcess, rng: random.Random, flush: str) -> str:
    threshold = rng.randint(1, MAX_THRESHOLD[flush])
    delay_s = rng.uniform(0, 0.05)
    bench.wait_for_acked(threshold)
    time.sleep(delay_s)  # deliberate: land anywhere between two progress lines
    return f"{delay_s * 1000:.0f} ms after acked >= {threshold}"


def at_startup(bench: BenchProcess, rng: random.Random, flush: str) -> str:
    # The first line ({"acked": 0}) comes right after the store opened, as the writers start.
    bench.wait_for_first_line()
    return "at the first progress line"


def after_random_sleep(bench: BenchProcess, rng: random.Random, flush: str) -> str:
    # Without reading the output: the kill may come while the child imports, opens or
    # creates the store, or anywhere in its writing.
    delay_s = rng.uniform(0.05, 1.5)
    time.sleep(delay_s)  # deliberate: the random kill moment
    return f"{delay_s:.2f} s after start"


@pytest.mark.slow
@pytest.mark.parametrize("repeat", range(3))
@pytest.mark.parametrize(("flush", "writers"), MODES)
def test_kill_after_random_acked_threshold(
    tmp_path: Path, flush: str, writers: int, repeat: int
) -> None:
    kill_and_check(tmp_path, flush, writers, after_threshold)


@pytest.mark.parametrize(("flush", "writers"), MODES)
def test_kill_right_after_startup(tmp_path: Path, flush: str, writers: int) -> None:
    kill_and_check(tmp_path, flush, writers, at_startup)


@pytest.mark.slow
@pytest.mark.parametrize(("flush", "writers"), MODES)
def test_kill_after_random_sleep_without_reading(tmp_path: Path, flush: str, writers: int) -> None:
    kill_and_check(tmp_path, flush, writers, after_random_sleep)


# put_key writes the entry, then the hash slot, then the header (IndexFile._write_header), once
# per key and two keys per message, so killing before the N-th header write cuts an insert
# short after the first or the second key of a message (N odd or even, until a roll of the
# index file, which writes one header more, swaps them). The native path inserts a put's keys
# in one C call (IndexFile.put_requests), where no Python hook can stop it half way: there the
# kill lands before the N-th such call, after the put's consume-queue units, before its keys.
@pytest.mark.parametrize("parity", [1, 2], ids=["odd-header-write", "even-header-write"])
def test_kill_inside_an_index_insert(tmp_path: Path, parity: int) -> None:
    call = 2 * random.Random(crash_seed()).randint(500, 2_000) + parity
    target = (
        "IndexFile.put_requests" if native.IMPLEMENTATION == "native" else "IndexFile._write_header"
    )
    faults = ["--kill-before", f"pocketmq.store.index_file:{target}", "--kill-call", str(call)]

    def plan(bench: BenchProcess, rng: random.Random, flush: str) -> str:
        bench.finish()
        return f"before index header write {call}"

    kill_and_check(tmp_path, "async", 1, plan, faults)
