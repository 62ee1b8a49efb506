"""A full disk, for real and without root: the bench writer runs under RLIMIT_FSIZE.

The child (crash_child.py --fsize-limit) lowers the file size limit while the bench is
writing, so that creating the next preallocated file fails with EFBIG, as fallocate fails with
ENOSPC on a full disk. The writer must not die (no traceback, no SIGBUS): the put that needs
the new CommitLog segment comes back CREATE_MAPPED_FILE_FAILED, the bench reports it and exits
with status 1. Then the store is reopened without the limit, and everything acknowledged must
be intact, ``store inspect --verify`` must pass and new puts must continue the queues.

The limit applies per file (RLIMIT_FSIZE is not a quota), so which files fail depends on its
size: 84,040-byte index files and 6,000-byte consume-queue files fit under 512 KiB while a
1 MiB CommitLog segment does not; under 4 KiB only existing files can be written, so usually a
consume-queue file (they roll most often) fails before the CommitLog does: dispatch then lags
behind acknowledged puts, the store closes with its abort marker left in place, and recovery
must catch the queues and the index up.

Each test draws a fresh seed for the moment the limit is set (POCKETMQ_CRASH_SEED replays one).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from crash_helpers import (
    COMMITLOG_FILE_SIZE,
    CQ_FILE_SIZE,
    INDEX_FILE_SIZE,
    BenchProcess,
    bench_args,
    check_recovered_store,
    crash_child_argv,
    crash_seed,
    write_broker_conf,
)

pytestmark = [pytest.mark.crash]

# Index and consume-queue files fit, a CommitLog segment does not.
SEGMENT_LIMIT = 512 * 1024
# Not even a consume-queue file fits (the 4 KiB checkpoint exists before the limit is set).
ANY_FILE_LIMIT = 4096
assert INDEX_FILE_SIZE < SEGMENT_LIMIT < COMMITLOG_FILE_SIZE
assert ANY_FILE_LIMIT < CQ_FILE_SIZE < INDEX_FILE_SIZE


@pytest.mark.parametrize(
    ("limit", "limit_after_acked", "flush", "writers"),
    [
        pytest.param(
            SEGMENT_LIMIT,
            (2_000, 8_000),
            "async",
            1,
            id="segment-async-1writer",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            SEGMENT_LIMIT,
            (1_000, 3_000),
            "sync",
            16,
            id="segment-sync-16writers",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ANY_FILE_LIMIT,
            (2_000, 8_000),
            "async",
            1,
            id="every-file-async-1writer",
            marks=pytest.mark.slow,
        ),
        # The very first segment cannot be created: nothing is ever acknowledged.
        pytest.param(SEGMENT_LIMIT, (0, 0), "async", 1, id="from-start-async-1writer"),
    ],
)
def test_file_size_limit_fails_puts_cleanly(
    tmp_path: Path, limit: int, limit_after_acked: tuple[int, int], flush: str, writers: int
) -> None:
    seed = crash_seed()
    after = random.Random(seed).randint(*limit_after_acked)
    conf = write_broker_conf(tmp_path)
    store_dir = tmp_path / "store"
    faults = ["--fsize-limit", str(limit), "--limit-after-acked", str(after)]
    argv = crash_child_argv(faults, bench_args(store_dir, conf, flush, writers))
    with BenchProcess(argv) as bench:
        status = bench.finish()
    acked = bench.last_acked
    ctx = (
        f"seed={seed} flush={flush} writers={writers} limit={limit} bytes "
        f"after acked >= {after}: acked={acked}"
    )
    stderr = bench.stderr_text()
    assert "Traceback" not in stderr, f"{ctx}: the bench crashed\n{bench.describe()}"
    assert status == 1, f"{ctx}: expected exit status 1\n{bench.describe()}"
    result = bench.result
    assert result is not None, f"{ctx}: no result line\n{bench.describe()}"
    assert result["failed"] >= 1, f"{ctx}: no put failed\n{bench.describe()}"
    first_error = result["first_error"]
    assert first_error.startswith("CREATE_MAPPED_FILE_FAILED"), f"{ctx}: {first_error}"
    assert "File too large" in first_error, f"{ctx}: {first_error}"
    assert acked >= after, f"{ctx}: the limit came before {after} acks\n{bench.describe()}"
    assert result["acked"] >= acked, f"{ctx}: result {result} vs progress {acked}"
    check_recovered_store(store_dir, conf, acked, writers == 1, ctx)
