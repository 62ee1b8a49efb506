"""What the gRPC endpoint's own handlers cost per call, without grpcio: the part of the broker's
CPU per gRPC call that is pocketmq's.

A real ``Broker`` (ASYNC_FLUSH, a temp store) and its ``MessagingService`` servicer run in this
process on uvloop; the handlers are called directly with v2 request messages as grpcio would
hand them over (already parsed) and a stand-in context carrying the 5.x Python client's
metadata. No sockets, no grpcio, no protobuf parsing of requests or serializing of answers:
those are grpcio's, measured by grpc_floor.py. The process's CPU time (every thread, so the
store's too) is read around each phase:

  send          SendMessage, one 1 KiB message per call (as the 5.x client sends)
  receive       ReceiveMessage, batches of 32 (invisible 30 s), per message received
  ack           AckMessage, one entry per call (as the 5.x client acks)
  change        ChangeInvisibleDuration, per call
  heartbeat     Heartbeat, per call

    python bench/grpc_handlers.py [--count 20000] [--size 1024]

Linux only.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import uvloop
from google.protobuf.duration_pb2 import Duration

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.grpc.calls import Context
from pocketmq.grpc.server import MessagingService
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.store.config import StoreConfig

TOPIC = "BenchTopic"
GROUP = "BenchGroup"
QUEUES = 8
BATCH = 32
INVISIBLE_S = 30


class ClientContext:
    """What the servicer reads off a call of the 5.x Python client: its metadata
    (rocketmq/v5/util/signature.py), its address and no deadline."""

    def __init__(self) -> None:
        self._metadata = (
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"),
            ("x-mq-date-time", "20261124T101500Z"),
            ("x-mq-request-id", str(uuid.uuid4())),
            ("x-mq-client-id", "bench-host@4242@0@handlers"),
            ("x-mq-namespace", ""),
        )

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: object, details: str) -> None:
        raise RuntimeError(f"aborted with {code}: {details}")


def send_request(body: bytes) -> svc.SendMessageRequest:
    message = pb.Message(topic=pb.Resource(name=TOPIC), body=body)
    sp = message.system_properties
    sp.tag = "TagA"
    sp.message_id = uuid.uuid4().hex.upper()
    sp.message_type = pb.NORMAL
    sp.body_encoding = pb.IDENTITY
    sp.born_host = "127.0.0.1"
    sp.born_timestamp.GetCurrentTime()
    return svc.SendMessageRequest(messages=[message])


async def timed(name: str, calls: int, run: Callable[[], Awaitable[int]]) -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    units = await run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(f"{name:<10} {units:>7,} x  {cpu * 1e6 / units:7.1f} µs CPU each  "
          f"({calls:,} calls, {wall:.2f} s)", flush=True)  # fmt: skip


async def bench(root: Path, count: int, size: int) -> None:
    broker = Broker(BrokerConfig(listen_port=0, store=StoreConfig(store_path_root_dir=root)))
    await broker.start()
    try:
        broker.topics.create_system_if_absent(TOPIC, QUEUES, PERM_READ_WRITE)
        broker.subscription_groups.find(GROUP)
        service = MessagingService(broker, "127.0.0.1")
        context = cast(Context, ClientContext())  # the servicer reads only these methods
        requests = [send_request(b"x" * size) for _ in range(count)]
        topic, group = pb.Resource(name=TOPIC), pb.Resource(name=GROUP)
        received: list[pb.Message] = []

        async def send() -> int:
            for request in requests:
                response = await service.SendMessage(request, context)
                assert response.status.code == pb.OK, response.status
            return count

        async def receive() -> int:
            request = svc.ReceiveMessageRequest(
                group=group, message_queue=pb.MessageQueue(topic=topic, id=-1),
                filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                batch_size=BATCH, invisible_duration=Duration(seconds=INVISIBLE_S),
                long_polling_timeout=Duration(seconds=0),
            )  # fmt: skip
            calls = 0
            while len(received) < count:
                calls += 1
                async for response in service.ReceiveMessage(request, context):
                    if response.HasField("message"):
                        received.append(response.message)
            return len(received)

        async def change() -> int:
            for i, message in enumerate(received[: count // 2]):
                response = await service.ChangeInvisibleDuration(
                    svc.ChangeInvisibleDurationRequest(
                        group=group, topic=topic, message_id=message.system_properties.message_id,
                        receipt_handle=message.system_properties.receipt_handle,
                        invisible_duration=Duration(seconds=INVISIBLE_S),
                    ),
                    context,
                )  # fmt: skip
                assert response.status.code == pb.OK, response.status
                received[i].system_properties.receipt_handle = response.receipt_handle
            return count // 2

        async def ack() -> int:
            for message in received:
                sp = message.system_properties
                entry = svc.AckMessageEntry(
                    message_id=sp.message_id, receipt_handle=sp.receipt_handle
                )
                response = await service.AckMessage(
                    svc.AckMessageRequest(group=group, topic=topic, entries=[entry]), context
                )
                assert response.status.code == pb.OK, response.status
            return len(received)

        async def heartbeat() -> int:
            request = svc.HeartbeatRequest(group=group, client_type=pb.SIMPLE_CONSUMER)
            for _ in range(count):
                await service.Heartbeat(request, context)
            return count

        await timed("send", count, send)
        await timed("receive", count // BATCH, receive)
        await timed("change", count // 2, change)
        await timed("ack", count, ack)
        await timed("heartbeat", count, heartbeat)
    finally:
        await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="messages sent and consumed")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="pocketmq-grpc-handlers-"))
    try:
        uvloop.run(bench(root, args.count, args.size))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
