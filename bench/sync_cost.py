"""`make bench`: what one fdatasync costs for the bytes a SYNC_FLUSH group commit covers, by how
they were written: write(2), or a copy into a shared mapping of the file (as the CommitLog
appends), its blocks fallocated ahead (as the store reserves them) or not, and with the next
group copied in while the sync runs (as puts go on during a group commit).

Each variant appends --total bytes in groups of --group bytes (default: 1,390 records of
1,204 bytes, what one sync covered in the store bench's SYNC 64 x 64 run) to a fresh file in
--dir and syncs after each group; it prints the sync times and the throughput.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path


def _plain(path: Path, total: int, data: bytes) -> list[float]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    times = []
    try:
        for _ in range(total // len(data)):
            os.write(fd, data)
            t = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
    return times


def _mapped(path: Path, total: int, data: bytes, *, reserve: bool, overlap: bool) -> list[float]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    os.ftruncate(fd, total)
    if reserve:
        os.posix_fallocate(fd, 0, total)
    mm = mmap.mmap(fd, total)
    times: list[float] = []

    def sync() -> None:
        t = time.perf_counter()
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)

    try:
        n = len(data)
        for pos in range(0, total - n + 1, n):
            if overlap and pos:
                # The previous group syncs while this one is copied in.
                syncing = threading.Thread(target=sync)
                syncing.start()
                mm[pos : pos + n] = data
                syncing.join()
            else:
                mm[pos : pos + n] = data
                if not overlap:
                    sync()
    finally:
        mm.close()
        os.close(fd)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: temp)")
    parser.add_argument("--total", type=int, default=256 << 20, help="bytes per variant")
    parser.add_argument("--group", type=int, default=1390 * 1204, help="bytes per sync")
    args = parser.parse_args()
    data = os.urandom(args.group)
    total = args.total
    variants: list[tuple[str, Callable[[Path], list[float]]]] = [
        ("write(2)", lambda p: _plain(p, total, data)),
        ("mapping, fallocated", lambda p: _mapped(p, total, data, reserve=True, overlap=False)),
        ("mapping, sparse", lambda p: _mapped(p, total, data, reserve=False, overlap=False)),
        (
            "mapping, next group copied in during the sync",
            lambda p: _mapped(p, total, data, reserve=True, overlap=True),
        ),
    ]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"{args.group:,} bytes per fdatasync, {total >> 20} MiB per variant")
        print(f"{'variant':<48} {'syncs':>6} {'p50 ms':>7} {'p90 ms':>7} {'MB/s':>7}")
        for name, run in variants:
            path = Path(tmp) / "file"
            start = time.perf_counter()
            times = sorted(run(path))
            wall = time.perf_counter() - start
            path.unlink()
            p50, p90 = times[len(times) // 2] * 1e3, times[int(len(times) * 0.9)] * 1e3
            rate = total / wall / 1e6
            print(f"{name:<48} {len(times):>6} {p50:>7.2f} {p90:>7.2f} {rate:>7.1f}")


if __name__ == "__main__":
    main()
