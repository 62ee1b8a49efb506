"""The peer harness's W1 shape against one ``pocketmq serve``: broker CPU per batched message.

``send_batch`` of 256 messages of 1 KiB to a topic of 4 queues, 4 batches in flight, from
pocketmq.client on uvloop (as ../shared/bench/peers/adapter_pocketmq.py drives W1), after a
warm-up of 20 batches. Prints throughput and the server's and this client's CPU time per
message (/proc/<pid>/stat); ``--profile FILE`` records a raw py-spy profile of the server
meanwhile. The server runs the implementation this process's environment selects
(``POCKETMQ_PURE_PYTHON=1`` for the pure-Python one). Linux only.

    .venv/bin/python bench/w1_bench.py [--count 200000] [--profile w1.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import uvloop

from harness import Meter, ServeProcess, fmt_result, py_spy
from pocketmq.client import Producer, message
from pocketmq.protocol.native import DESCRIPTION

TOPIC = "W1Bench"
BATCH = 256
IN_FLIGHT = 4
WARMUP_BATCHES = 20


async def produce(producer: Producer, body: bytes, count: int) -> None:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(k: int) -> None:
        try:
            await producer.send_batch([message(TOPIC, body) for _ in range(k)])
        finally:
            slots.release()

    tasks = []
    for start in range(0, count, BATCH):
        await slots.acquire()
        tasks.append(asyncio.ensure_future(one(min(BATCH, count - start))))
    await asyncio.gather(*tasks)


async def bench(args: argparse.Namespace, workdir: Path) -> None:
    serve = ServeProcess(workdir)
    try:
        serve.admin("update-topic", "-t", TOPIC, "-r", "4", "-w", "4")
        body = os.urandom(args.size)
        async with Producer("w1_bench", f"127.0.0.1:{serve.ports['namesrv']}") as producer:
            await produce(producer, body, WARMUP_BATCHES * BATCH)
            with py_spy(serve.proc.pid, args.profile):
                meter = Meter(serve.proc.pid)
                await produce(producer, body, args.count)
                result = meter.result(args.count)
        print(f"W1 shape, {DESCRIPTION}: {fmt_result(result)}")
    finally:
        serve.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000, help="messages measured")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--profile", type=Path, default=None, help="raw py-spy profile to write")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-w1-bench-"))
    try:
        uvloop.run(bench(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
