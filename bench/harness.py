"""What the benchmarks that drive a ``pocketmq serve`` subprocess share: starting and stopping
it, the CPU time of a process from /proc/<pid>/stat, nearest-rank percentiles, a per-phase
meter and its one-line summary, N concurrent timed calls, py-spy recording, and the options of
the send phases, free ports and Redis's command line.

Used by client_bench.py, grpc_bench.py, transaction_bench.py, sql_filter_bench.py and
w1_bench.py / w2_bench.py. No
workload here. Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

READY_TIMEOUT_S = 30.0
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def add_send_arguments(parser: argparse.ArgumentParser) -> None:
    """--count, --size and --concurrency, as the send phases of every benchmark read them."""
    parser.add_argument("--count", type=int, default=20_000, help="messages per send phase")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument(
        "--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 32],
        help="in-flight sends of each send phase, comma-separated",
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_server_argv(port: int, workdir: Path, appendfsync: str) -> list[str]:
    """Debian's redis-server with the AOF on (``appendfsync`` everysec or always), as the
    reference of the benchmarks. No RDB snapshots and no AOF rewrites: both fork a child whose
    CPU time would be missing from the server's, and our CommitLog has nothing like them."""
    return [
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
        "--appendonly", "yes", "--appendfsync", appendfsync,
        "--save", "", "--auto-aof-rewrite-percentage", "0",
        "--logfile", str(workdir / "redis.log"),
    ]  # fmt: skip


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process (every thread), in seconds."""
    # The command name in field 2 may hold spaces: split after its closing parenthesis.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


@dataclass(frozen=True, slots=True)
class PhaseResult:
    messages: int
    msgs_per_s: float
    server_cpu_us_per_msg: float
    client_cpu_us_per_msg: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    lost: int = 0


class Meter:
    """Wall time and CPU time of the server and of this process over one phase."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.wall0 = time.perf_counter()
        self.server0 = process_cpu_s(server_pid)
        self.client0 = time.process_time()

    def result(
        self, messages: int, latencies_ms: list[float] | None = None, *, lost: int = 0
    ) -> PhaseResult:
        wall = time.perf_counter() - self.wall0
        server = process_cpu_s(self.server_pid) - self.server0
        client = time.process_time() - self.client0
        lat = sorted(latencies_ms or [])
        return PhaseResult(
            messages=messages,
            msgs_per_s=messages / wall,
            server_cpu_us_per_msg=server * 1e6 / messages,
            client_cpu_us_per_msg=client * 1e6 / messages,
            p50_ms=percentile(lat, 0.50) if lat else None,
            p99_ms=percentile(lat, 0.99) if lat else None,
            max_ms=lat[-1] if lat else None,
            lost=lost,
        )


def fmt_result(r: PhaseResult) -> str:
    text = (
        f"{r.msgs_per_s:>9,.0f} msgs/s  server {r.server_cpu_us_per_msg:6.1f} µs/msg  "
        f"client {r.client_cpu_us_per_msg:6.1f} µs/msg"
    )
    if r.p50_ms is not None:
        text += f"  p50 {r.p50_ms:.3f} ms  p99 {r.p99_ms:.3f} ms  max {r.max_ms:.3f} ms"
    if r.lost:
        text += f"  LOST {r.lost}"
    return text


async def timed_calls(
    call: Callable[[], Awaitable[object]], count: int, concurrency: int
) -> list[float]:
    """Await ``call()`` ``count`` times from ``concurrency`` tasks, each waiting for its
    previous call; returns every call's latency in ms."""
    latencies_ms: list[float] = []
    remaining = count

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter()
            await call()
            latencies_ms.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return latencies_ms


class ServeProcess:
    """``pocketmq serve`` on free ports in ``workdir``, with ``options`` added to its command
    line (``-c broker.conf``); ``ports`` is its ready file (namesrv, broker, grpc)."""

    def __init__(self, workdir: Path, *options: str) -> None:
        self.workdir = workdir
        ready = workdir / "ready.json"
        self.log_path = workdir / "serve.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pocketmq.cli", "serve", "--store", str(workdir / "store"),
                 "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0",
                 "--ready-file", str(ready), *options],
                stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                env={**os.environ, "HOME": str(workdir)},  # client offsets and logs stay here
            )  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pocketmq serve did not start:\n{self.log_path.read_text()}")
            time.sleep(0.02)
        self.ports: dict[str, int] = orjson.loads(ready.read_bytes())

    def admin(self, *command: str) -> None:
        namesrv = f"127.0.0.1:{self.ports['namesrv']}"
        subprocess.run(
            [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *command],
            check=True, capture_output=True, timeout=60, cwd=self.workdir,
            env={**os.environ, "HOME": str(self.workdir)},
        )  # fmt: skip

    def stop(self) -> int | None:
        """SIGTERM and wait; returns the exit code (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


@contextlib.contextmanager
def py_spy(pid: int, output: Path | None) -> Iterator[None]:
    """Record a raw py-spy profile of ``pid`` to ``output`` while the block runs (if given).

    Only the thread holding the GIL is sampled (``--gil``): threads parked on a lock or the
    event loop in epoll would otherwise fill the profile with waiting.
    """
    if output is None:
        yield
        return
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    proc = subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--gil", "--format", "raw", "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # let it attach before the phase starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        proc.wait(60)
