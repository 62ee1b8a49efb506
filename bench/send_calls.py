"""Python function calls per single send in the broker, counted: a figure that does not move
with the machine's noise.

The frames and in-process broker of ``send_handler_bench.py``; ``sys.setprofile`` counts every
Python function call (and C function called from Python) made while ``--sends`` sends are read
``--concurrency`` to a read and answered, after a warm-up. The broker's CPU per send at c=32 is
mostly Python glue between a few native calls (BENCHMARKS.md, "A single send in a third fewer
Python calls"), so the count tracks it, and the table says which calls a change removed.

    python bench/send_calls.py [--concurrency 1,32] [--sends 640] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import functools
import shutil
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import uvloop

from fake_channel import TOPIC
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.remoting.channel import RemotingChannel
from pocketmq.store.config import StoreConfig
from send_handler_bench import QUEUES, AnswerSink, capture_sends, drive

WARMUP = 1000


def _count(
    python: collections.Counter[str], native: collections.Counter[str],
    frame: FrameType, event: str, arg: Any,
) -> None:  # fmt: skip
    if event == "call":
        python[_where(frame)] += 1
    elif event == "c_call":
        native[getattr(arg, "__qualname__", repr(arg))] += 1


def _where(frame: FrameType) -> str:
    code = frame.f_code
    path = code.co_filename.split("site-packages/")[-1].split("src/")[-1]
    return f"{code.co_name} ({path}:{code.co_firstlineno})"


async def count_calls(
    root: Path, concurrency: list[int], sends: int
) -> dict[int, tuple[collections.Counter[str], collections.Counter[str]]]:
    broker = Broker(BrokerConfig(listen_port=0, store=StoreConfig(store_path_root_dir=root)))
    await broker.start()
    try:
        broker.topics.create_system_if_absent(TOPIC, QUEUES, PERM_READ_WRITE)
        assert broker.server is not None
        frames = await capture_sends(WARMUP + sends * len(concurrency), 1024)
        channel = RemotingChannel(broker.server.handler)
        sink = AnswerSink()
        channel.connection_made(sink)  # type: ignore[arg-type]
        await drive(channel, sink, frames[:WARMUP], 32)
        used = WARMUP
        counts = {}
        for c in concurrency:
            python: collections.Counter[str] = collections.Counter()
            native: collections.Counter[str] = collections.Counter()
            batch = frames[used : used + sends]
            used += sends
            sys.setprofile(functools.partial(_count, python, native))
            try:
                await drive(channel, sink, batch, c)
            finally:
                sys.setprofile(None)
            counts[c] = (python, native)
        return counts
    finally:
        await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 32]
    )
    parser.add_argument("--sends", type=int, default=640, help="sends counted per concurrency")
    parser.add_argument("--top", type=int, default=25, help="calls listed per concurrency")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pocketmq-send-calls-"))
    try:
        counts = uvloop.run(count_calls(root, args.concurrency, args.sends))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    n = args.sends
    for c, (python, native) in counts.items():
        print(
            f"send c={c}: {sum(python.values()) / n:.1f} Python calls, "
            f"{sum(native.values()) / n:.1f} C calls a send (the driver's own included)"
        )
        for where, times in python.most_common(args.top):
            print(f"  {times / n:6.2f}  {where}")


if __name__ == "__main__":
    main()
