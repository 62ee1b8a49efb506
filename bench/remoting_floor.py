"""The floor under client_bench's single sends: a remoting round trip that does no work.

A ``RemotingServer`` subprocess (uvloop, pocketmq's RemotingChannel) answers every request at
once with a send's answer, and this process invokes it through a RemotingChannel with the
request a ``Producer.send`` of 1 KiB makes (SEND_MESSAGE_V2, the same header fields), from 1
and from 32 concurrent tasks. Next to it, in the same run, Redis's own floor: ``PING`` through
redis-py + hiredis (the client stack of client_bench's Redis figures) to a ``redis-server``.
Whatever a real send costs above these figures is the broker's and the Producer's work; these
are the event loop, the sockets and the frame codec.

    python bench/remoting_floor.py [--count 20000] [--concurrency 1,32]

Prints requests/s and the CPU time per request of the server process and of this one.
Linux only (CPU times from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis
import uvloop

from harness import (
    READY_TIMEOUT_S,
    Meter,
    PhaseResult,
    add_send_arguments,
    fmt_result,
    free_port,
    redis_server_argv,
    timed_calls,
)
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting.channel import HandlerResult, RemotingChannel
from pocketmq.remoting.server import RemotingServer

SEND_ANSWER = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "1", "queueOffset": "7"}


def answer(_channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
    return cmd.response(0, None, SEND_ANSWER)


async def serve(port: int) -> None:
    server = RemotingServer(answer, port=port)
    await server.start()
    await asyncio.Event().wait()


def send_request(size: int) -> RemotingCommand:
    header = {
        "a": "bench_producer", "b": "BenchTopic", "c": "TBW102", "d": 4, "e": 1, "f": 0,
        "g": int(time.time() * 1000), "h": 0, "j": 0, "k": False, "m": False,
        "i": encode_properties({"TAGS": "bench", "UNIQ_KEY": "7F0000010000000000000000000A",
                                "WAIT": "true"}),
    }  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"x" * size)


async def remoting_phase(port: int, pid: int, count: int, size: int, c: int) -> PhaseResult:
    loop = asyncio.get_running_loop()
    _, channel = await loop.create_connection(RemotingChannel, "127.0.0.1", port)
    try:
        meter = Meter(pid)
        # A fresh command per call, as a Producer builds one per send.
        latencies = await timed_calls(lambda: channel.invoke(send_request(size), 3.0), count, c)
        return meter.result(count, latencies)
    finally:
        await channel.aclose()


async def redis_phase(port: int, pid: int, count: int, c: int) -> PhaseResult:
    client = aioredis.Redis(port=port, max_connections=c)
    try:
        meter = Meter(pid)
        latencies = await timed_calls(client.ping, count, c)
        return meter.result(count, latencies)
    finally:
        await client.aclose()


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server on port {port} did not start") from None
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_send_arguments(parser)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server subprocess
    args = parser.parse_args()
    if args.serve:
        uvloop.run(serve(args.serve))
        return
    with tempfile.TemporaryDirectory() as tmp:
        ours_port, redis_port = free_port(), free_port()
        ours = subprocess.Popen([sys.executable, __file__, "--serve", str(ours_port)])
        redis = subprocess.Popen(redis_server_argv(redis_port, Path(tmp), "everysec"))
        try:
            wait_listening(ours_port, ours)
            wait_listening(redis_port, redis)
            for c in args.concurrency:
                r = uvloop.run(remoting_phase(ours_port, ours.pid, args.count, args.size, c))
                print(f"  remoting floor  c={c:<3} {fmt_result(r)}", flush=True)
                r = uvloop.run(redis_phase(redis_port, redis.pid, args.count, c))
                print(f"  redis PING      c={c:<3} {fmt_result(r)}", flush=True)
        finally:
            for proc in (ours, redis):
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
