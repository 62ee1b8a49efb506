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

The last test fills a real disk: a tmpfs of a few MiB mounted in a user and mount namespace
(skipped where unprivileged namespaces are off), where the store meets ENOSPC on a chunk
reservation inside a CommitLog segment, since files are sparse and reserved as they are written.

Each test draws a fresh seed for the moment the limit is set (POCKETMQ_CRASH_SEED replays one).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
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


# A disk of this size holds the first CommitLog chunks, then refuses a later one.
TMPFS_SIZE = "4m"


def _namespaced_tmpfs_argv(mount_point: Path, argv: list[str]) -> list[str]:
    """argv run in a new user and mount namespace on a small tmpfs at mount_point."""
    script = f'mount -t tmpfs -o size={TMPFS_SIZE} tmpfs "$0" && exec "$@"'
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script,
            str(mount_point), *argv]  # fmt: skip


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        _namespaced_tmpfs_argv(probe, ["true"]), capture_output=True, timeout=30, check=False
    )
    return done.returncode == 0


def test_full_tmpfs_refuses_the_next_chunk_and_keeps_serving_reads(tmp_path: Path) -> None:
    """A real full disk: files are sparse and reserved a chunk ahead, so the put whose chunk
    does not fit is refused (CREATE_MAPPED_FILE_FAILED, ENOSPC) inside an existing segment; the
    process is not killed by SIGBUS and every acknowledged message reads back."""
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("no unprivileged user+mount namespaces here to mount a small tmpfs")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    child = Path(__file__).with_name("full_disk_child.py")
    argv = [sys.executable, str(child), str(mount_point / "store")]
    done = subprocess.run(
        _namespaced_tmpfs_argv(mount_point, argv), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    ctx = f"status {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr[-3000:]}"
    assert done.returncode == 0, ctx  # -SIGBUS (-7) if a write hit an unreserved page
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["refusal"] == "CREATE_MAPPED_FILE_FAILED", ctx
    assert "No space left on device" in result["detail"], ctx
    # More than the first 1 MiB chunk went in: a later chunk inside the segment failed.
    assert result["acked"] > 1000, ctx
    assert result["read_back"] == result["acked"], ctx
    assert result["later"] == ["CREATE_MAPPED_FILE_FAILED"] * 3, ctx
    assert "Traceback" not in done.stderr, ctx


def test_full_tmpfs_answers_queries_and_recovers_without_reading_a_hole(tmp_path: Path) -> None:
    """On tmpfs even a read of a hole needs space: on a full one it kills the reader with
    SIGBUS. Key queries whose slots were never written, and an abnormal recovery on the still
    full disk (CommitLog, consume-queue and index scans, zeroing past the cut) and a verify
    by ``inspect_store``, read only where data is (MappedFile.data_end)."""
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("no unprivileged user+mount namespaces here to mount a small tmpfs")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    child = [sys.executable, str(Path(__file__).with_name("full_disk_restart_child.py"))]
    store, filled, reopened = mount_point / "store", tmp_path / "filled", tmp_path / "reopened"
    script = f'"$@" fill {store} > {filled} && "$@" reopen {store} {filled} > {reopened}'
    argv = ["sh", "-c", script, "sh", *child]
    done = subprocess.run(
        _namespaced_tmpfs_argv(mount_point, argv), capture_output=True, text=True, timeout=180,
        check=False,
    )  # fmt: skip
    outputs = [p.read_text() if p.exists() else "" for p in (filled, reopened)]
    ctx = f"status {done.returncode}\nstdout: {outputs}\nstderr: {done.stderr[-3000:]}"
    assert done.returncode == 0, ctx  # -SIGBUS (135 from sh) if a read met a hole
    first = json.loads(outputs[0].strip().splitlines()[-1])
    assert first["refusal"].startswith("CREATE_MAPPED_FILE_FAILED"), ctx
    assert first["acked"] > 1000, ctx
    assert (first["keys_found"], first["absent_found"]) == (40, 0), ctx
    second = json.loads(outputs[1].strip().splitlines()[-1])
    assert second["last_exit_ok"] is False, ctx
    assert second["read_back"] == first["acked"], ctx
    assert (second["keys_found"], second["absent_found"]) == (40, 0), ctx
    assert second["records"] == first["acked"], ctx
    assert second["problems"] == [], ctx
    assert "Traceback" not in done.stderr, ctx
