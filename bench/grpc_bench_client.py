"""The client side of bench/grpc_bench.py: the official 5.x client, ``rocketmq-python-client``
(package ``rocketmq``), driving pocketmq's gRPC endpoint. Unmodified and unpatched.

Runs in its own process, started by grpc_bench.py with the venv's python: the client's generated
protobuf code and pocketmq's (``pocketmq.grpc.v2``) register the same ``apache.rocketmq.v2``
names, so this script imports nothing from pocketmq, and the driver never imports ``rocketmq``.
Set HOME to a temp dir: the client writes its logs under ``~/logs``.

Usage: grpc_bench_client.py ENDPOINT SERVER_PID [options]

Phases (1 KiB bodies unless --size says otherwise), in this order:

  send c=1      ``Producer.send`` (sync) from one thread
  send c=N      ``Producer.send`` from N threads
  send async    ``Producer.send_async`` with N in flight (a semaphore released in the callback)
  receive/ack   ``SimpleConsumer.receive(32, 30 s)`` + ``ack`` of each message, from R threads,
                draining exactly what the phases above wrote (plus the warm-up)
  push          a fresh topic filled with M messages (not timed), then a ``PushConsumer`` whose
                listener returns SUCCESS, timed from its start to the last message consumed

Each send phase stops at --count messages or after --max-seconds, whichever comes first, so the
drain knows how many to expect. Each phase prints one line ``RESULT {json}`` on stdout with
``phase``, ``messages``, ``wall_s``, the server's CPU (``server_user_s``, ``server_sys_s``:
/proc/SERVER_PID/stat before and after) and this process's (``client_cpu_s``); the sends add
``p50_ms``, ``p99_ms``, ``max_ms`` and ``errors``; the consumers ``received`` (unique ids),
``duplicates``, ``missing`` and ``extra``. Linux only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
TAG = "bench"
RECEIVE_BATCH = 32  # ReceiveMessage max_message_num, the remoting bench's pull batch
INVISIBLE_S = 30
AWAIT_S = 2  # long-polling time of an empty receive: bounds how long the drain's threads linger
DRAIN_TIMEOUT_S = 90.0
SETTLE_S = 2.0  # after a push drain: time for redeliveries or extra messages to show


def process_cpu_s(pid: int) -> tuple[float, float]:
    """utime and stime of a process (every thread), in seconds."""
    # The command name in field 2 may hold spaces: split after its closing parenthesis.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS_PER_S, int(fields[12]) / CLOCK_TICKS_PER_S


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


def latency_summary(latencies_ms: list[float]) -> dict[str, float | None]:
    lat = sorted(latencies_ms)
    if not lat:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99), "max_ms": lat[-1]}


def emit(phase: str, result: dict[str, Any]) -> None:
    sys.stdout.write("RESULT " + json.dumps({"phase": phase, **result}) + "\n")
    sys.stdout.flush()


class Meter:
    """Wall time and CPU time of the server and of this process over one phase."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.wall0 = time.perf_counter()
        self.server0 = process_cpu_s(server_pid)
        self.client0 = time.process_time()

    def result(self, messages: int, **extra: Any) -> dict[str, Any]:
        user, system = process_cpu_s(self.server_pid)
        return {
            "messages": messages,
            "wall_s": time.perf_counter() - self.wall0,
            "server_user_s": user - self.server0[0],
            "server_sys_s": system - self.server0[1],
            "client_cpu_s": time.process_time() - self.client0,
            **extra,
        }


@contextlib.contextmanager
def py_spy(pid: int, output: Path | None, *, native: bool = False) -> Iterator[None]:
    """Record a raw py-spy profile of ``pid`` to ``output`` while the block runs (if given).

    Only the thread holding the GIL is sampled (``--gil``), as in client_bench.py. ``native``
    adds C frames: most of a gRPC call's time is in grpcio's Cython and C core, which a
    Python-only profile shows as time in the event loop's ``run``.
    """
    if output is None:
        yield
        return
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    proc = subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--gil", "--format", "raw", "--output", str(output),
         *(["--native"] if native else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # let it attach before the phase starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        proc.wait(60)


def new_message(topic: str, body: bytes) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.tag = TAG
    return msg


class Quota:
    """Hands out up to ``count`` sends to several threads, until ``deadline`` (monotonic)."""

    def __init__(self, count: int, seconds: float) -> None:
        self.left = count
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0 or time.monotonic() >= self.deadline:
                return False
            self.left -= 1
            return True


def send_sync_phase(
    producer: Producer, topic: str, body: bytes, server_pid: int, count: int, threads: int,
    seconds: float,
) -> dict[str, Any]:  # fmt: skip
    quota = Quota(count, seconds)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []

    def sender(lat: list[float]) -> None:
        while quota.take():
            t0 = time.perf_counter()
            try:
                producer.send(new_message(topic, body))
            except Exception as exc:  # counted and reported, not fatal to the phase
                errors.append(repr(exc))
                continue
            lat.append((time.perf_counter() - t0) * 1000)

    workers = [threading.Thread(target=sender, args=(lat,)) for lat in latencies]
    meter = Meter(server_pid)
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    flat = [x for lat in latencies for x in lat]
    return meter.result(
        len(flat), **latency_summary(flat), errors=len(errors), error_sample=errors[:3]
    )


def send_async_phase(
    producer: Producer, topic: str, body: bytes, server_pid: int, count: int, in_flight: int,
    seconds: float,
) -> dict[str, Any]:  # fmt: skip
    quota = Quota(count, seconds)
    slots = threading.Semaphore(in_flight)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    issued = 0
    finished = threading.Event()
    issuing_over = threading.Event()
    done = 0

    def on_done(t0: float, future: Any) -> None:
        nonlocal done
        exc = future.exception()
        with lock:
            if exc is None:
                latencies.append((time.perf_counter() - t0) * 1000)
            else:
                errors.append(repr(exc))
            done += 1
            if done == issued and issuing_over.is_set():
                finished.set()
        slots.release()

    meter = Meter(server_pid)
    while quota.take():
        slots.acquire()
        t0 = time.perf_counter()
        with lock:
            issued += 1
        future = producer.send_async(new_message(topic, body))
        future.add_done_callback(lambda f, t0=t0: on_done(t0, f))
    with lock:
        issuing_over.set()
        if done == issued:
            finished.set()
    finished.wait(DRAIN_TIMEOUT_S)
    return meter.result(
        len(latencies), **latency_summary(latencies), errors=len(errors), error_sample=errors[:3]
    )


class Tally:
    """Consumed message ids: counts, duplicates, and an event once ``expected`` are in."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: set[str] = set()
        self.duplicates = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.first_at: float | None = None
        self.last_at: float | None = None

    def add(self, msg_id: str) -> None:
        with self.lock:
            now = time.perf_counter()
            if self.first_at is None:
                self.first_at = now
            if msg_id in self.seen:
                self.duplicates += 1
                return
            self.seen.add(msg_id)
            self.last_at = now
            if len(self.seen) >= self.expected:
                self.done.set()

    def summary(self) -> dict[str, Any]:
        """Unique messages, copies received again, and the difference from ``expected``."""
        with self.lock:
            return {
                "received": len(self.seen),
                "duplicates": self.duplicates,
                "missing": max(0, self.expected - len(self.seen)),
                "extra": max(0, len(self.seen) - self.expected),
            }


def receive_ack_phase(
    config: ClientConfiguration, topic: str, group: str, server_pid: int, expected: int,
    threads: int,
) -> dict[str, Any]:  # fmt: skip
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=AWAIT_S)
    consumer.startup()
    tally = Tally(expected)
    errors: list[str] = []
    receives = [0]

    def worker() -> None:
        while not tally.done.is_set():
            try:
                messages = consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
            except Exception as exc:  # counted and reported
                errors.append(repr(exc))
                time.sleep(0.05)
                continue
            receives[0] += 1
            for msg in messages:
                try:
                    consumer.ack(msg)
                except Exception as exc:
                    errors.append(repr(exc))
                    continue
                tally.add(msg.message_id)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    meter = Meter(server_pid)
    for w in workers:
        w.start()
    tally.done.wait(DRAIN_TIMEOUT_S)
    result = meter.result(
        len(tally.seen), receives=receives[0], errors=len(errors), error_sample=errors[:3]
    )
    tally.done.set()  # stops the workers after their current (long-polling) receive
    for w in workers:
        w.join(AWAIT_S + 10)
    # Exactly what was sent: nothing more may be left to receive once the drain is complete.
    leftover = consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
    consumer.shutdown()
    return {**result, **tally.summary(), "leftover": len(leftover)}


class CountingListener(MessageListener):
    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def consume(self, message: Message) -> ConsumeResult:
        self.tally.add(message.message_id)
        return ConsumeResult.SUCCESS


def push_phase(
    config: ClientConfiguration, topic: str, group: str, server_pid: int, expected: int
) -> dict[str, Any]:
    """Drain ``expected`` messages from a fresh ``topic`` with a new PushConsumer."""
    tally = Tally(expected)
    meter = Meter(server_pid)
    consumer = PushConsumer(config, group, CountingListener(tally), {topic: FilterExpression("*")})
    consumer.startup()
    # Timed from the consumer's start (its first assignment scan comes after 1 s) to the last
    # message consumed.
    tally.done.wait(DRAIN_TIMEOUT_S)
    result = meter.result(len(tally.seen))
    first_s = tally.first_at - meter.wall0 if tally.first_at is not None else None
    time.sleep(SETTLE_S)  # acks trail the listener: redeliveries or extras would show here
    consumer.shutdown()
    return {**result, **tally.summary(), "first_consumed_s": first_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", help="host:port of the gRPC endpoint")
    parser.add_argument("server_pid", type=int, help="the broker process, for its CPU time")
    parser.add_argument("--topic", default="BenchTopic", help="of the send phases and the drain")
    parser.add_argument("--push-topic", default="BenchPush", help="fresh, for the push phase")
    parser.add_argument("--count", type=int, default=20_000, help="messages per send phase")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="cap per send phase")
    parser.add_argument("--concurrency", type=int, default=32, help="N of send c=N and async")
    parser.add_argument("--receivers", type=int, default=4, help="threads of receive/ack")
    parser.add_argument("--push-count", type=int, default=5_000, help="M of the push phase")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--warmup", type=int, default=500, help="sends before the first phase")
    parser.add_argument(
        "--profile", type=Path, default=None, help="directory for py-spy profiles of the server"
    )
    parser.add_argument("--native", action="store_true", help="profile C frames too")
    args = parser.parse_args()

    body = os.urandom(args.size)
    config = ClientConfiguration(args.endpoint, Credentials())
    producer = Producer(config, (args.topic, args.push_topic))
    producer.startup()
    pid = args.server_pid
    n = args.concurrency

    def run(name: str, fn: Callable[..., dict[str, Any]], *fn_args: Any) -> int:
        out = None
        if args.profile is not None:
            out = args.profile / f"grpc_{name.replace(' ', '_').replace('/', '_')}.txt"
        with py_spy(pid, out, native=args.native):
            result = fn(*fn_args)
        emit(name, result)
        messages: int = result["messages"]
        return messages

    topic, count, cap = args.topic, args.count, args.max_seconds
    try:
        # Warm-up: connections, routes, the server's first settings; drained below too.
        written = send_sync_phase(producer, topic, body, pid, args.warmup, n, 30.0)["messages"]
        written += run("send c=1", send_sync_phase, producer, topic, body, pid, count, 1, cap)
        written += run(f"send c={n}", send_sync_phase, producer, topic, body, pid, count, n, cap)
        written += run("send async", send_async_phase, producer, topic, body, pid, count, n, cap)
        run("receive/ack", receive_ack_phase, config, topic, "bench_simple", pid, written,
            args.receivers)  # fmt: skip
        # Fill the fresh push topic first, with async sends (not a phase: not timed).
        filled = send_async_phase(producer, args.push_topic, body, pid, args.push_count, n, 120.0)
        run("push", push_phase, config, args.push_topic, "bench_push", pid, filled["messages"])
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
