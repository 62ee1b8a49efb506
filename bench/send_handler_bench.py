"""The broker's CPU per single send over the 4.x remoting protocol, in this process.

A real ``Broker`` (ASYNC_FLUSH, or SYNC_FLUSH with ``--flush sync``; a temp store) runs on
uvloop here; a ``RemotingChannel`` as its
server makes one is handed the SEND_MESSAGE_V2 frames that ``Producer.send`` of 1 KiB writes
(captured from a real Producer before the clock starts, each with its own message id), through
``data_received``, as socket reads would deliver them: at c=1 one frame per read, the next once
the answer is written; at c=32 32 frames per read, the next read once all 32 are answered. The
answers go to a transport that keeps nothing. So the figure is the broker's own work per send
(frame decode, header fields, topic and queue, the put and its dispatch, the answer, asyncio)
without the sockets, the client or another process cooling the caches: the part of
client_bench.py's "server µs/msg" that our code decides, and steady on a shared machine, since
it is process CPU time (every thread: the store's too). Best of ``--rounds``.

    python bench/send_handler_bench.py [--count 20000] [--concurrency 1,32] [--rounds 3]
                                       [--flush async|sync]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from fake_channel import TOPIC, NullTransport, faked_producer
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.client import message
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.protocol.native import DESCRIPTION
from pocketmq.remoting.channel import RemotingChannel
from pocketmq.store.config import FlushDiskType, StoreConfig

QUEUES = 4


class Capture(NullTransport):
    """A producer's transport that keeps each request frame and never answers."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        # One write may hold several frames (a channel writes an iteration's frames at once).
        view = memoryview(data)
        while view:
            end = 4 + int.from_bytes(view[:4], "big")
            self.frames.append(bytes(view[:end]))
            view = view[end:]


async def capture_sends(count: int, size: int) -> list[bytes]:
    """The frames of ``count`` ``Producer.send`` calls (their answers never come)."""
    channel = RemotingChannel()
    capture = Capture()
    channel.connection_made(capture)  # type: ignore[arg-type]
    producer = faked_producer(channel, QUEUES)
    body = b"x" * size
    while len(capture.frames) < count:
        sends = [
            asyncio.ensure_future(producer.send(message(TOPIC, body, tags="bench")))
            for _ in range(min(1000, count - len(capture.frames)))
        ]
        await asyncio.sleep(0)
        for send in sends:
            send.cancel()
        await asyncio.gather(*sends, return_exceptions=True)
    return capture.frames


class AnswerSink(NullTransport):
    """The broker channel's transport: counts the frames written, keeps none."""

    peer = ("127.0.0.1", 50000)

    def __init__(self) -> None:
        self.written = 0
        self.on_write: asyncio.Future[None] | None = None
        self.want = 0

    def _wrote(self, frames: int) -> None:
        self.written += frames
        if self.on_write is not None and self.written >= self.want and not self.on_write.done():
            self.on_write.set_result(None)

    def write(self, data: bytes) -> None:
        self._wrote(1)

    def writelines(self, parts: Any) -> None:
        # A frame is its head, and its body when it has one; a send's answer has no body.
        self._wrote(len(list(parts)))


async def drive(channel: RemotingChannel, sink: AnswerSink, frames: list[bytes], c: int) -> None:
    """Feed ``frames`` ``c`` at a time, each read once the previous one's answers are out."""
    loop = asyncio.get_running_loop()
    for start in range(0, len(frames), c):
        chunk = frames[start : start + c]
        sink.want = sink.written + len(chunk)
        sink.on_write = loop.create_future()
        # From a callback, as the loop delivers a read: outside any task.
        loop.call_soon(channel.data_received, b"".join(chunk))
        await sink.on_write


async def bench(
    root: Path, count: int, size: int, concurrency: list[int], rounds: int, flush: FlushDiskType
) -> None:
    store = StoreConfig(store_path_root_dir=root, flush_disk_type=flush)
    broker = Broker(BrokerConfig(listen_port=0, store=store))
    await broker.start()
    try:
        broker.topics.create_system_if_absent(TOPIC, QUEUES, PERM_READ_WRITE)
        assert broker.server is not None
        warmup = 1000
        frames = await capture_sends(warmup + count * rounds * len(concurrency), size)
        channel = RemotingChannel(broker.server.handler)
        sink = AnswerSink()
        channel.connection_made(sink)  # type: ignore[arg-type]
        await drive(channel, sink, frames[:warmup], 32)
        used = warmup
        # For a profiler to attach to the timed part (py-spy --pid) once the frames are ready.
        print("timing", file=sys.stderr, flush=True)
        best = {c: float("inf") for c in concurrency}
        for _ in range(rounds):
            for c in concurrency:
                batch = frames[used : used + count]
                used += count
                cpu0 = time.process_time()
                await drive(channel, sink, batch, c)
                best[c] = min(best[c], (time.process_time() - cpu0) * 1e6 / count)
        print(
            f"broker CPU per single send (SEND_MESSAGE_V2, {size} B, {flush.value}), in process; "
            f"{DESCRIPTION}"
        )
        for c in concurrency:
            print(f"  send c={c:<3} {best[c]:6.1f} µs  (best of {rounds} rounds of {count})")
    finally:
        await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument(
        "--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 32]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flush", choices=["async", "sync"], default="async")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="pocketmq-send-handler-"))
    try:
        flush = FlushDiskType.SYNC_FLUSH if args.flush == "sync" else FlushDiskType.ASYNC_FLUSH
        uvloop.run(bench(root, args.count, args.size, args.concurrency, args.rounds, flush))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
