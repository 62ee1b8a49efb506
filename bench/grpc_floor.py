"""grpcio's own cost per call: the floor under every RPC of the gRPC endpoint.

A bare ``grpc.aio`` server on uvloop, in a subprocess of this script, serves one generic unary
handler that echoes its request; no pocketmq code and no protobuf (the payload is raw bytes).
This process calls it with 1 KiB requests from a ``grpc.aio`` channel, 1 and N calls in flight,
and reads the server's CPU time (utime + stime, every thread) from /proc/<pid>/stat before and
after each phase, as grpc_bench.py does for the broker. The server's CPU per call is the price
of one unary RPC in grpcio on this machine: what our handlers add lies above it.

With ``--client-metadata`` each call carries the headers the 5.x Python client sends on every
RPC (``x-mq-client-id``, a fresh ``x-mq-request-id`` and ``x-mq-date-time``, ...), which the
server's HPACK decoder and metadata handling pay for too.

    python bench/grpc_floor.py [--count 20000] [--size 1024] [--concurrency 1,32]
                               [--client-metadata]

Linux only. Not a benchmark of pocketmq: see grpc_bench.py for the endpoint itself.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import grpc
import uvloop

from harness import add_send_arguments, free_port, process_cpu_s

METHOD = "/bench.Echo/Echo"
STOP_TIMEOUT_S = 10.0


async def serve(port: int) -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


Metadata = tuple[tuple[str, str], ...]


def client_metadata() -> Metadata:
    """The headers of one call of the 5.x Python client (rocketmq/v5/util/signature.py)."""
    return (
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-date-time", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())),
        ("x-mq-request-id", str(uuid.uuid4())),
        ("x-mq-client-id", "bench-host@4242@0@floor"),
        ("x-mq-namespace", ""),
    )


async def phase(
    channel: grpc.aio.Channel,
    server_pid: int,
    args: argparse.Namespace,
    concurrency: int,
) -> None:
    call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(METHOD)
    payload = b"x" * args.size
    per_worker = args.count // concurrency
    metadata: Callable[[], Metadata | None] = (
        client_metadata if args.client_metadata else lambda: None
    )

    async def worker() -> None:
        for _ in range(per_worker):
            await call(payload, metadata=metadata())

    cpu0, wall0, own0 = process_cpu_s(server_pid), time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    done = per_worker * concurrency
    wall = time.perf_counter() - wall0
    server_us = (process_cpu_s(server_pid) - cpu0) * 1e6 / done
    client_us = (time.process_time() - own0) * 1e6 / done
    print(
        f"c={concurrency:<3} {done:>7,} calls  {done / wall:>8,.0f} calls/s  "
        f"server CPU {server_us:6.1f} µs/call  client CPU {client_us:6.1f} µs/call",
        flush=True,
    )


async def drive(port: int, server_pid: int, args: argparse.Namespace) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        warm_up: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(METHOD)
        await warm_up(b"warm-up")
        for concurrency in args.concurrency:
            await phase(channel, server_pid, args, concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_send_arguments(parser)  # --count calls per phase, --size of each, --concurrency
    parser.add_argument(
        "--client-metadata", action="store_true", help="send the 5.x client's call headers"
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        uvloop.run(serve(args.serve))
        return

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            sys.exit("the echo server did not start")
        headers = ", the 5.x client's headers" if args.client_metadata else ""
        print(f"grpcio {grpc.__version__}, echo server pid {server.pid}, "
              f"{args.size} B requests{headers}")  # fmt: skip
        uvloop.run(drive(port, server.pid, args))
    finally:
        server.terminate()
        server.wait(STOP_TIMEOUT_S)


if __name__ == "__main__":
    main()
