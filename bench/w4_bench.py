"""The peer harness's W4 shape with a timeline: single sends at a fixed rate to a PushConsumer
already waiting, after a W1-shaped load, and when the late messages were sent.

``pocketmq serve`` runs as a subprocess (ASYNC_FLUSH, a temp dir); a W1-shaped load goes first
(send_batch of 256 x 1 KiB, 4 in flight, ``--preload`` messages, as the harness runs W1 and W3
before W4), then one producer sends ``--count`` messages at ``--rate`` per second, each stamped
with its send time, to a PushConsumer in this process that subscribed 3 s before. Prints the
send-to-arrival percentiles and, for every message over ``--late-ms``, when it was sent
(ms from the first send) and how late it arrived: a periodic stall shows as a period. The
harness's own W4 has the consumer in a second process; this one is for finding where the tail
comes from (run ``perf record -e sched:sched_switch -g -p <server pid>`` beside it), not for
comparing with Redis.

    .venv/bin/python bench/w4_bench.py [--count 20000] [--rate 2000] [--preload 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import uvloop

from harness import ServeProcess
from pocketmq.client import ConsumeFromWhere, ConsumeResult, Producer, PushConsumer, message
from pocketmq.protocol.message import MessageExt
from w1_bench import TOPIC as W1_TOPIC
from w1_bench import produce

TOPIC = "W4Bench"
STAMP = 20  # bytes of the body holding the send time (ns, decimal)


async def run(workdir: Path, args: argparse.Namespace) -> None:
    serve = ServeProcess(workdir)
    try:
        for topic in (W1_TOPIC, TOPIC):
            serve.admin("update-topic", "-t", topic, "-r", "4", "-w", "4")
        namesrv = f"127.0.0.1:{serve.ports['namesrv']}"
        body = b"x" * args.size
        arrivals: list[tuple[int, int]] = []  # (sent, arrived) ns
        done = asyncio.Event()

        async def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeResult:
            now = time.perf_counter_ns()
            arrivals.extend((int(m.body[:STAMP]), now) for m in msgs)
            if len(arrivals) >= args.count:
                done.set()
            return ConsumeResult.CONSUME_SUCCESS

        async with Producer("w4-producer", namesrv) as producer:
            if args.preload:
                await produce(producer, body, args.preload)
            consumer = PushConsumer(
                "w4-consumer", namesrv, listener=listener,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            )  # fmt: skip
            consumer.subscribe(TOPIC, "*")
            await consumer.start()
            try:
                await asyncio.sleep(3.0)  # the first rebalance: pulls parked on the broker
                print(f"server pid {serve.proc.pid}: sending", flush=True)
                first = time.perf_counter_ns()
                start = time.perf_counter()
                for i in range(args.count):
                    delay = start + i / args.rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    stamp = str(time.perf_counter_ns()).encode().rjust(STAMP, b"0")
                    await producer.send(message(TOPIC, stamp + body[STAMP:]))
                await asyncio.wait_for(done.wait(), 10.0)
            finally:
                await consumer.shutdown()
        report(arrivals, first, args.late_ms)
    finally:
        serve.stop()


def report(arrivals: list[tuple[int, int]], first: int, late_ms: float) -> None:
    ages = sorted((arrived - sent) / 1e6 for sent, arrived in arrivals)

    def pct(p: float) -> float:
        return ages[min(len(ages) - 1, int(len(ages) * p))]

    print(
        f"{len(ages)} messages: p50 {pct(0.5):.3f} ms, p99 {pct(0.99):.3f}, "
        f"p99.9 {pct(0.999):.3f}, max {ages[-1]:.2f}"
    )
    late = sorted(
        ((sent - first) / 1e6, (arrived - sent) / 1e6)
        for sent, arrived in arrivals
        if (arrived - sent) / 1e6 > late_ms
    )
    print(f"{len(late)} over {late_ms} ms (sent at ms: late by ms):")
    print("  " + ", ".join(f"{at:.0f}: {by:.2f}" for at, by in late))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--preload", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--late-ms", type=float, default=1.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-w4-"))
    try:
        uvloop.run(run(workdir, args))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
