"""`make bench`: produce and consume through pocketmq.client, next to Redis Streams.

Starts ``pocketmq serve`` and Debian's ``redis-server`` (AOF on, ``appendfsync everysec``, the
counterpart of our ASYNC_FLUSH) as subprocesses on free loopback ports, each with a temp dir,
and runs the same workload against both from this process, with 1 KiB messages:

  send c=N    sync sends (``Producer.send`` / ``XADD``) from N concurrent asyncio tasks
  batch       batches of 32 (``Producer.send_batch`` / 32 ``XADD`` in one pipeline)
  consume     drain everything the send phases wrote (``PushConsumer`` / ``XREADGROUP`` +
              ``XACK``, batches of 32)
  e2e         sends paced at a fixed rate to a consumer already waiting; each message carries
              its send time and the consumer takes the difference

For each phase: throughput, latencies, and the CPU time the server process (and this client)
spent per message, read from /proc/<pid>/stat before and after. Linux only.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis
import uvloop
from redis.typing import EncodableT, FieldT

from harness import (
    READY_TIMEOUT_S,
    Meter,
    PhaseResult,
    ServeProcess,
    add_send_arguments,
    fmt_result,
    free_port,
    py_spy,
    redis_server_argv,
    timed_calls,
)
from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    MessageExt,
    Producer,
    PushConsumer,
    message,
)
from profile_summary import parse, report

TOPIC = "BenchTopic"
E2E_TOPIC = "BenchE2E"
STAMP_PROPERTY = "BENCH_SENT_NS"  # perf_counter_ns() at send; producer and consumer share a clock
DRAIN_TIMEOUT_S = 60.0

# Called by a consumer for each message, with its send stamp (None for unstamped messages).
OnMessage = Callable[[int | None], None]


# ---------------------------------------------------------------------- the systems under test


class System(abc.ABC):
    """A server subprocess and a client for it, with the operations every phase needs."""

    name: str
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect once the server is up."""

    @abc.abstractmethod
    async def send(self, topic: str, body: bytes, *, stamp: bool = False) -> None:
        """One acknowledged send; ``stamp`` adds the send time for the e2e phase."""

    @abc.abstractmethod
    async def send_batch(self, topic: str, bodies: list[bytes]) -> None: ...

    @abc.abstractmethod
    def consumer(
        self, topic: str, group: str, on_message: OnMessage
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Consume ``topic`` from its first message while the context is open."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the clients and stop the server (SIGTERM, then wait)."""

    def _stop_server(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PocketMQ(System):
    name = "pocketmq"

    def __init__(self, workdir: Path, consumer_batch: int) -> None:
        self.serve = ServeProcess(workdir)
        self.proc = self.serve.proc
        self.log_path = self.serve.log_path
        self.namesrv = f"127.0.0.1:{self.serve.ports['namesrv']}"
        self.consumer_batch = consumer_batch
        self.producer = Producer("bench_producer", self.namesrv)

    async def start(self) -> None:
        await self.producer.start()

    async def send(self, topic: str, body: bytes, *, stamp: bool = False) -> None:
        props = {STAMP_PROPERTY: str(time.perf_counter_ns())} if stamp else None
        await self.producer.send(message(topic, body, tags="bench", properties=props))

    async def send_batch(self, topic: str, bodies: list[bytes]) -> None:
        await self.producer.send_batch([message(topic, b, tags="bench") for b in bodies])

    @contextlib.asynccontextmanager
    async def consumer(self, topic: str, group: str, on_message: OnMessage) -> AsyncIterator[None]:
        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            for m in msgs:
                stamp = m.properties.get(STAMP_PROPERTY)
                on_message(int(stamp) if stamp is not None else None)
            return ConsumeResult.CONSUME_SUCCESS

        consumer = PushConsumer(
            group, self.namesrv, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=self.consumer_batch, consume_batch_max_size=self.consumer_batch,
        )  # fmt: skip
        consumer.subscribe(topic, "*")
        await consumer.start()
        try:
            yield
        finally:
            await consumer.shutdown()

    async def close(self) -> None:
        try:
            await self.producer.shutdown()
        finally:
            self.serve.stop()


class RedisStreams(System):
    """One stream per topic; a consumer group with ``readers`` consumers reads it."""

    name = "redis"

    def __init__(self, workdir: Path, consumer_batch: int, readers: int) -> None:
        port = free_port()
        self.log_path = workdir / "redis.log"
        self.proc = subprocess.Popen(
            redis_server_argv(port, workdir, "everysec"),
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.port = port
        self.consumer_batch = consumer_batch
        self.readers = readers
        self.redis = aioredis.Redis(host="127.0.0.1", port=port, max_connections=1024)

    async def start(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                await self.redis.ping()
                return
            except (ConnectionError, aioredis.ConnectionError, aioredis.BusyLoadingError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                await asyncio.sleep(0.02)

    async def send(self, topic: str, body: bytes, *, stamp: bool = False) -> None:
        fields: dict[FieldT, EncodableT] = {"body": body}
        if stamp:
            fields["t"] = time.perf_counter_ns()
        await self.redis.xadd(topic, fields)

    async def send_batch(self, topic: str, bodies: list[bytes]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(topic, {"body": body})
        await pipe.execute()

    @contextlib.asynccontextmanager
    async def consumer(self, topic: str, group: str, on_message: OnMessage) -> AsyncIterator[None]:
        await self.redis.xgroup_create(topic, group, id="0", mkstream=True)
        stop = asyncio.Event()

        async def read(name: str) -> None:
            while not stop.is_set():
                # BLOCK is the long poll: the read returns as soon as an entry arrives.
                # RESP2 reply: [[stream, [(entry id, {field: value}), ...]]]
                resp: Any = await self.redis.xreadgroup(
                    group, name, {topic: ">"}, count=self.consumer_batch, block=100
                )
                if not resp:
                    continue
                entries: list[tuple[bytes, dict[bytes, bytes]]] = resp[0][1]
                for _entry_id, fields in entries:
                    stamp = fields.get(b"t")
                    on_message(int(stamp) if stamp is not None else None)
                await self.redis.xack(topic, group, *(entry_id for entry_id, _ in entries))

        tasks = [asyncio.create_task(read(f"c{i}")) for i in range(self.readers)]
        try:
            yield
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    async def close(self) -> None:
        try:
            await self.redis.aclose()
        finally:
            self._stop_server()


# ---------------------------------------------------------------------- phases


async def send_phase(system: System, body: bytes, count: int, concurrency: int) -> PhaseResult:
    meter = Meter(system.pid)
    latencies_ms = await timed_calls(lambda: system.send(TOPIC, body), count, concurrency)
    return meter.result(count, latencies_ms)


async def batch_phase(system: System, body: bytes, count: int, batch: int) -> PhaseResult:
    meter = Meter(system.pid)
    for _ in range(count // batch):
        await system.send_batch(TOPIC, [body] * batch)
    return meter.result(count // batch * batch)


class Counter:
    """Counts consumed messages and records their latencies; ``done`` is set at ``expected``."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.received = 0
        self.latencies_ms: list[float] = []
        self.done = asyncio.Event()

    def on_message(self, stamp: int | None) -> None:
        if stamp is not None:
            self.latencies_ms.append((time.perf_counter_ns() - stamp) / 1e6)
        self.received += 1
        if self.received >= self.expected:
            self.done.set()


async def consume_phase(system: System, expected: int) -> PhaseResult:
    counter = Counter(expected)
    meter = Meter(system.pid)
    async with system.consumer(TOPIC, "bench_drain", counter.on_message):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                await counter.done.wait()
        result = meter.result(min(counter.received, expected), lost=expected - counter.received)
    return result


async def e2e_phase(system: System, body: bytes, rate: float, seconds: float) -> PhaseResult:
    count = int(rate * seconds)
    await system.send(E2E_TOPIC, body)  # creates the topic, so the consumer finds a route
    counter = Counter(count + 1)
    async with system.consumer(E2E_TOPIC, "bench_e2e", counter.on_message):
        meter = Meter(system.pid)
        sends: set[asyncio.Task[None]] = set()
        start = time.perf_counter()
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(system.send(E2E_TOPIC, body, stamp=True))
            sends.add(task)
            task.add_done_callback(sends.discard)
        await asyncio.gather(*sends)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                await counter.done.wait()
        return meter.result(count, counter.latencies_ms, lost=count - len(counter.latencies_ms))


async def run_system(system: System, args: argparse.Namespace) -> dict[str, PhaseResult]:
    body = os.urandom(args.size)
    results: dict[str, PhaseResult] = {}

    async def phase(name: str, run: Callable[[], Awaitable[PhaseResult]]) -> None:
        # py-spy reads Python stacks: only the pocketmq server can be profiled.
        profiled = args.profile is not None and isinstance(system, PocketMQ)
        out = args.profile / f"{name.replace(' ', '_')}.txt" if profiled else None
        with py_spy(system.pid, out):
            results[name] = await run()
        print(f"  {system.name:<9} {name:<9} {fmt_result(results[name])}", flush=True)

    # Warm-up: connections, routes, topic creation; the consume phase drains these too.
    warmup = 1000
    await asyncio.gather(*(system.send(TOPIC, body) for _ in range(warmup)))
    written = warmup
    for c in args.concurrency:
        await phase(f"send c={c}", functools.partial(send_phase, system, body, args.count, c))
        written += args.count
    await phase("batch", lambda: batch_phase(system, body, args.count, args.batch))
    written += results["batch"].messages
    await phase("consume", lambda: consume_phase(system, written))
    await phase("e2e", lambda: e2e_phase(system, body, args.e2e_rate, args.e2e_seconds))
    return results


# ---------------------------------------------------------------------- reporting


def comparison_rows(
    ours: dict[str, PhaseResult], theirs: dict[str, PhaseResult]
) -> list[tuple[str, float, float]]:
    rows: list[tuple[str, float, float]] = []
    metrics = [
        ("msgs/s", "msgs_per_s"),
        ("p50 ms", "p50_ms"),
        ("p99 ms", "p99_ms"),
        ("max ms", "max_ms"),
        ("server CPU µs/msg", "server_cpu_us_per_msg"),
        ("client CPU µs/msg", "client_cpu_us_per_msg"),
    ]
    for phase, a in ours.items():
        b = theirs[phase]
        for label, attr in metrics:
            x, y = getattr(a, attr), getattr(b, attr)
            if x is not None and y is not None:
                rows.append((f"{phase} {label}", x, y))
    return rows


def print_table(rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{'figure':<34} {'pocketmq':>12} {'redis':>12} {'pocketmq/redis':>15}")
    for label, x, y in rows:
        ratio = f"{x / y:.2f}" if y else "-"
        print(f"{label:<34} {x:>12,.3f} {y:>12,.3f} {ratio:>15}")


async def bench(args: argparse.Namespace, workdir: Path) -> dict[str, dict[str, PhaseResult]]:
    out: dict[str, dict[str, PhaseResult]] = {}
    for name in args.systems:
        sysdir = workdir / name
        sysdir.mkdir()
        system: System
        if name == "pocketmq":
            system = PocketMQ(sysdir, args.batch)
        else:
            system = RedisStreams(sysdir, args.batch, args.readers)
        try:
            await system.start()
            print(f"{name}: server pid {system.pid}", flush=True)
            out[name] = await run_system(system, args)
        finally:
            await system.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_send_arguments(parser)
    parser.add_argument("--batch", type=int, default=32, help="messages per batch and per pull")
    parser.add_argument(
        "--readers", type=int, default=4, help="Redis consumers in the group (pocketmq: 4 queues)"
    )
    parser.add_argument("--e2e-rate", type=float, default=2000.0, help="msgs/s of the e2e phase")
    parser.add_argument("--e2e-seconds", type=float, default=5.0)
    parser.add_argument(
        "--systems", type=lambda s: s.split(","), default=["pocketmq", "redis"],
        help="pocketmq,redis or one of them",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None, help="directory for py-spy profiles of pocketmq"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    args = parser.parse_args()
    if args.e2e_rate * args.e2e_seconds < 1:
        parser.error("--e2e-rate x --e2e-seconds must make at least one message")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if "redis" in args.systems and shutil.which("redis-server") is None:
        sys.exit("redis-server is not on PATH: apt-get install redis-server (make bench does)")

    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-client-bench-"))
    try:
        results = uvloop.run(bench(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    if "pocketmq" in results and "redis" in results:
        print_table(comparison_rows(results["pocketmq"], results["redis"]))
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            print(f"\n== {path.name}\n{report(parse(path), 8)}")
    if args.json:
        print(
            orjson.dumps(
                {n: {p: asdict(r) for p, r in phases.items()} for n, phases in results.items()}
            ).decode()
        )


if __name__ == "__main__":
    main()
