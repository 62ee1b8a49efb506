"""`make bench`: the store append benchmark in the configurations BENCHMARKS.md records.

1 KiB messages; ASYNC_FLUSH with one writer putting one message at a time, and putting batches
of 256 to one queue (a producer's send_batch, as the peer harness's W1 sends); SYNC_FLUSH with
64 concurrent writers (group commit) putting one message at a time, and batches of 64. Each run
prints the store's throughput next to a raw sequential write of the same bytes to a plain file
on the same disk, measured in the same invocation; the SYNC_FLUSH runs also next to the disk's
fsync-bound rate for as many records per fdatasync as the writers put at once (write +
fdatasync per batch).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

# (name, options, multiple of --count). The batched run appends five times as many messages:
# at 200,000 it lasts half a second, shorter than the 500 ms flush interval, so nearly all of it
# is written back by the final flush, after the clock's appends rather than beside them.
RUNS = [
    ("async, 1 writer", ["--flush", "async", "--writers", "1"], 1),
    ("async, batch 256", ["--flush", "async", "--writers", "1", "--batch", "256"], 5),
    ("sync, 64 writers", ["--flush", "sync", "--writers", "64"], 1),
    ("sync, 64 x batch 64", ["--flush", "sync", "--writers", "64", "--batch", "64"], 2),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: temp)")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="pocketmq-bench-"))
    try:
        print(
            f"{'run':<18} {'messages':>9} {'msgs/s':>10} {'MB/s':>8} {'durable':>8} "
            f"{'raw MB/s':>9} {'ratio':>6} {'p50 us':>8} {'p99 us':>8} "
            f"{'fsync-bound':>11} {'ratio':>6}"
        )
        for number, (name, extra, scale) in enumerate(RUNS):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pocketmq.cli",
                    "store",
                    "bench",
                    "--dir",
                    str(base / f"run{number}"),
                    "--count",
                    str(args.count * scale),
                    "--size",
                    str(args.size),
                    "--json",
                    *extra,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = orjson.loads(out.strip().splitlines()[-1])
            print(
                f"{name:<18} {r['acked']:>9,} {r['msgs_per_s']:>10,.0f} {r['mb_per_s']:>8} "
                f"{r['durable_mb_per_s']:>8} {r['raw_mb_per_s']:>9} {r['ratio']:>6} "
                f"{r['put_p50_us']:>8} {r['put_p99_us']:>8} "
                f"{r['fsync_bound_msgs_per_s']:>11,.0f} {r['fsync_ratio']:>6}"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
