"""The peer harness's W2 in steady state: send_batch to a SYNC_FLUSH broker already running,
next to Redis Streams with ``appendfsync always`` driven as the harness drives it, same run.

W2 of ``../shared/bench/peers`` times pocketmq's SYNC_FLUSH broker's start-up with the workload:
its adapter launches ``pocketmq serve`` inside the timed ``produce(sync=True)``, sleeps a fixed
second for the broker's registration and creates the topic with ``pocketmq admin`` before the
first send, about 2 s against about 1 s of sending 50,000 messages; Redis's W2 only switches a
setting. This measures the workload alone: ``send_batch`` of 256 messages of 1 KiB to a topic
of 4 queues, 4 batches in flight (an acknowledgement means fdatasync'd), after a warm-up; Redis
7 with ``appendonly yes`` and ``appendfsync always``, XADD in non-transactional pipelines of
1,000 from redis-py + hiredis (the harness's idiom). Prints throughput and server CPU per
message for both. Linux only.

    .venv/bin/python bench/w2_bench.py [--count 50000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis
import uvloop

from harness import Meter, PhaseResult, ServeProcess, fmt_result, free_port, redis_server_argv
from pocketmq.client import Producer
from pocketmq.protocol.native import DESCRIPTION
from w1_bench import BATCH, TOPIC, WARMUP_BATCHES, produce

REDIS_PIPELINE = 1000


async def pocketmq_w2(workdir: Path, body: bytes, count: int) -> PhaseResult:
    conf = workdir / "broker.conf"
    conf.write_text("flushDiskType=SYNC_FLUSH\n")
    serve = ServeProcess(workdir, "-c", str(conf))
    try:
        serve.admin("update-topic", "-t", TOPIC, "-r", "4", "-w", "4")
        async with Producer("w2_bench", f"127.0.0.1:{serve.ports['namesrv']}") as producer:
            await produce(producer, body, WARMUP_BATCHES * BATCH)
            meter = Meter(serve.proc.pid)
            await produce(producer, body, count)
            return meter.result(count)
    finally:
        serve.stop()


def redis_w2(workdir: Path, body: bytes, count: int) -> PhaseResult:
    port = free_port()
    proc = subprocess.Popen(
        redis_server_argv(port, workdir, "always"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

        def send(n: int) -> None:
            pipe = client.pipeline(transaction=False)
            for start in range(0, n, REDIS_PIPELINE):
                for _ in range(min(REDIS_PIPELINE, n - start)):
                    pipe.xadd("w2", {"d": body})
                pipe.execute()

        send(WARMUP_BATCHES * BATCH)
        meter = Meter(proc.pid)
        send(count)
        result = meter.result(count)
        client.close()
        return result
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000, help="messages measured")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not on PATH: apt-get install redis-server")
    body = os.urandom(args.size)
    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-w2-bench-"))
    try:
        (workdir / "pocketmq").mkdir()
        (workdir / "redis").mkdir()
        ours = uvloop.run(pocketmq_w2(workdir / "pocketmq", body, args.count))
        theirs = redis_w2(workdir / "redis", body, args.count)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"W2 steady state, pocketmq ({DESCRIPTION}): {fmt_result(ours)}")
    print(f"W2 steady state, Redis appendfsync always:  {fmt_result(theirs)}")
    print(f"pocketmq / Redis: {ours.msgs_per_s / theirs.msgs_per_s:.2f}")


if __name__ == "__main__":
    main()
