"""`make bench`: the 5.x gRPC endpoint with the official client, next to remoting.

Runs two fresh ``pocketmq serve`` subprocesses (ASYNC_FLUSH, free loopback ports, temp dirs),
one after the other, with 1 KiB messages:

  remoting   our own client (``pocketmq.client``), through client_bench.py's phases:
             send c=1, send c=N, and a ``PushConsumer`` draining what they wrote
  gRPC       the official 5.x client, ``rocketmq-python-client`` 5.1.2, unmodified, run by
             grpc_bench_client.py in a subprocess: send c=1 and c=N (``Producer.send`` from 1 and
             N threads), ``Producer.send_async`` with N in flight, ``SimpleConsumer`` receive(32)
             + ack draining what those wrote, and a ``PushConsumer`` draining a fresh topic

The 5.x client must stay out of this process: its generated protobuf code and pocketmq's
register the same ``apache.rocketmq.v2`` names. Topics for it are created first with
``pocketmq admin update-topic`` (5.x clients need them to exist).

For each phase: throughput, send latencies, and the CPU time the broker process spent per
message (/proc/<pid>/stat before and after, as client_bench.py does); then a table of gRPC
against remoting. Linux only.

grpcio's own cost per call, the floor under these figures, is measured apart by
``grpc_floor.py`` (a bare grpc.aio echo server, no pocketmq code), and the handlers' own cost
without grpcio by ``grpc_handlers.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import uvloop

from client_bench import TOPIC, PocketMQ, consume_phase, send_phase
from harness import PhaseResult, ServeProcess, fmt_result
from profile_summary import parse, report

CLIENT_SCRIPT = Path(__file__).with_name("grpc_bench_client.py")
PUSH_TOPIC = "BenchPush"
WARMUP = 1000  # remoting sends before the first phase, as in client_bench.py


# ---------------------------------------------------------------------- remoting


async def remoting_phases(workdir: Path, args: argparse.Namespace) -> dict[str, PhaseResult]:
    system = PocketMQ(workdir, consumer_batch=32)
    body = os.urandom(args.size)
    results: dict[str, PhaseResult] = {}
    try:
        await system.start()
        print(f"remoting: server pid {system.pid}", flush=True)
        await asyncio.gather(*(system.send(TOPIC, body) for _ in range(WARMUP)))
        written = WARMUP
        for c in (1, args.concurrency):
            name = f"send c={c}"
            results[name] = await send_phase(system, body, args.count, c)
            written += results[name].messages
            print(f"  remoting  {name:<11} {fmt_result(results[name])}", flush=True)
        results["consume"] = await consume_phase(system, written)
        print(f"  remoting  {'consume':<11} {fmt_result(results['consume'])}", flush=True)
    finally:
        await system.close()
    return results


# ---------------------------------------------------------------------- gRPC


def to_phase_result(raw: dict[str, Any]) -> PhaseResult:
    messages = raw["messages"]
    per_msg = 1e6 / messages if messages else float("nan")
    return PhaseResult(
        messages=messages,
        msgs_per_s=messages / raw["wall_s"],
        server_cpu_us_per_msg=(raw["server_user_s"] + raw["server_sys_s"]) * per_msg,
        client_cpu_us_per_msg=raw["client_cpu_s"] * per_msg,
        p50_ms=raw.get("p50_ms"),
        p99_ms=raw.get("p99_ms"),
        max_ms=raw.get("max_ms"),
        lost=raw.get("missing", 0) + raw.get("errors", 0),
    )


def describe_raw(raw: dict[str, Any]) -> str:
    """What a gRPC phase line adds to fmt_result: the CPU split and the drain checks."""
    messages = raw["messages"] or 1
    parts = [
        f"server user/sys {raw['server_user_s'] * 1e6 / messages:.0f}/"
        f"{raw['server_sys_s'] * 1e6 / messages:.0f} µs/msg"
    ]
    if "received" in raw:
        parts.append(
            f"received {raw['received']} duplicates {raw['duplicates']} missing {raw['missing']}"
            f" extra {raw['extra'] + raw.get('leftover', 0)}"
        )
    if raw.get("first_consumed_s") is not None:
        parts.append(f"first consumed at {raw['first_consumed_s']:.2f} s")
    if raw.get("errors"):
        parts.append(f"ERRORS {raw['errors']}: {raw['error_sample']}")
    return "; ".join(parts)


def grpc_phases(workdir: Path, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    serve = ServeProcess(workdir)
    raws: dict[str, dict[str, Any]] = {}
    try:
        for topic in (TOPIC, PUSH_TOPIC):
            serve.admin("update-topic", "-t", topic)
        print(f"gRPC: server pid {serve.proc.pid}", flush=True)
        home = workdir / "client-home"  # the 5.x client logs under ~/logs
        home.mkdir()
        command = [
            sys.executable, str(CLIENT_SCRIPT), f"127.0.0.1:{serve.ports['grpc']}",
            str(serve.proc.pid), "--topic", TOPIC, "--push-topic", PUSH_TOPIC,
            "--count", str(args.count), "--max-seconds", str(args.max_seconds),
            "--concurrency", str(args.concurrency), "--receivers", str(args.receivers),
            "--push-count", str(args.push_count), "--size", str(args.size),
        ]  # fmt: skip
        if args.profile is not None:
            command += ["--profile", str(args.profile.resolve())]
            if args.native:
                command.append("--native")
        stderr_path = workdir / "grpc-client.err"
        with open(stderr_path, "wb") as stderr:
            client = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, cwd=home,
                env={**os.environ, "HOME": str(home)}, text=True,
            )  # fmt: skip
            assert client.stdout is not None
            # The whole client run is bounded: a hung client is killed, by its pid.
            timer = threading.Timer(args.client_timeout, client.kill)
            timer.start()
            try:
                read_results(client.stdout, raws)
            finally:
                timer.cancel()
                code = client.wait()
        if code != 0:
            tail = stderr_path.read_text(errors="replace")[-3000:]
            print(f"gRPC client exited with {code}:\n{tail}", file=sys.stderr, flush=True)
    finally:
        serve_code = serve.stop()
        if serve_code != 0:
            log = serve.log_path.read_text(errors="replace")[-3000:]
            print(f"pocketmq serve exited with {serve_code}:\n{log}", file=sys.stderr, flush=True)
    return raws


def read_results(stdout: IO[str], raws: dict[str, dict[str, Any]]) -> None:
    for line in stdout:
        if not line.startswith("RESULT "):
            continue
        raw = json.loads(line.removeprefix("RESULT "))
        name = raw.pop("phase")
        raws[name] = raw
        result = to_phase_result(raw)
        print(f"  gRPC      {name:<11} {fmt_result(result)}\n{'':<24}{describe_raw(raw)}")


# ---------------------------------------------------------------------- reporting


def comparison(
    grpc: dict[str, PhaseResult], remoting: dict[str, PhaseResult], n: int
) -> list[tuple[str, str, str]]:
    """(gRPC phase, remoting phase, label) pairs: like against like where both exist."""
    pairs = [
        ("send c=1", "send c=1", "send c=1"),
        (f"send c={n}", f"send c={n}", f"send c={n}"),
        ("send async", f"send c={n}", f"send_async {n} in flight vs c={n}"),
        ("receive/ack", "consume", "SimpleConsumer receive+ack vs consume"),
        ("push", "consume", "PushConsumer vs consume"),
    ]
    return [p for p in pairs if p[0] in grpc and p[1] in remoting]


def print_table(grpc: dict[str, PhaseResult], remoting: dict[str, PhaseResult], n: int) -> None:
    metrics = [
        ("msgs/s", "msgs_per_s"),
        ("p50 ms", "p50_ms"),
        ("p99 ms", "p99_ms"),
        ("broker CPU µs/msg", "server_cpu_us_per_msg"),
        ("client CPU µs/msg", "client_cpu_us_per_msg"),
    ]
    print(f"\n{'figure':<58} {'gRPC':>10} {'remoting':>10} {'gRPC/remoting':>14}")
    for g_phase, r_phase, label in comparison(grpc, remoting, n):
        for metric, attr in metrics:
            x, y = getattr(grpc[g_phase], attr), getattr(remoting[r_phase], attr)
            if x is None or y is None:
                continue
            ratio = f"{x / y:.2f}" if y else "-"
            print(f"{label + ', ' + metric:<58} {x:>10,.1f} {y:>10,.1f} {ratio:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="messages per send phase")
    parser.add_argument(
        "--max-seconds", type=float, default=10.0, help="cap per gRPC send phase (seconds)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="N: threads / in flight")
    parser.add_argument("--receivers", type=int, default=4, help="SimpleConsumer threads")
    parser.add_argument("--push-count", type=int, default=5_000, help="M of the push phase")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument(
        "--client-timeout", type=float, default=300.0, help="kill the gRPC client after this"
    )
    parser.add_argument(
        "--systems", type=lambda s: s.split(","), default=["remoting", "grpc"],
        help="remoting,grpc or one of them",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None, help="directory for py-spy profiles (gRPC phases)"
    )
    parser.add_argument("--native", action="store_true", help="profiles include C frames")
    parser.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-grpc-bench-"))
    remoting: dict[str, PhaseResult] = {}
    raws: dict[str, dict[str, Any]] = {}
    try:
        if "remoting" in args.systems:
            (workdir / "remoting").mkdir()
            remoting = uvloop.run(remoting_phases(workdir / "remoting", args))
        if "grpc" in args.systems:
            (workdir / "grpc").mkdir()
            raws = grpc_phases(workdir / "grpc", args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    grpc = {name: to_phase_result(raw) for name, raw in raws.items()}
    if grpc and remoting:
        print_table(grpc, remoting, args.concurrency)
    if args.profile:
        for path in sorted(args.profile.glob("grpc_*.txt")):
            print(f"\n== {path.name}\n{report(parse(path), 8)}")
    if args.json:
        out = {"remoting": {p: asdict(r) for p, r in remoting.items()}, "grpc": raws}
        print(json.dumps(out))
    expected = {"send c=1", f"send c={args.concurrency}", "send async", "receive/ack", "push"}
    if "grpc" in args.systems and set(raws) != expected:
        sys.exit(f"gRPC phases missing: {sorted(expected - set(raws))}")


if __name__ == "__main__":
    main()
