"""POP consumption across a broker crash: ``pocketmq serve`` is SIGKILLed while a consumer
holds received, unacked messages. After the restart on the same store, every message sent is
received and acked; the ones in flight at the kill come back with their attempt counted, and
not before their invisible time ran out. Driven with pocketmq's generated stubs."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from server_procs import ServerProcess

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub

pytestmark = [pytest.mark.integration, pytest.mark.slow]
META = (("x-mq-client-id", "crash-test@1@0@abc"),)
TOPIC = pb.Resource(name="PopCrashTopic")
GROUP = pb.Resource(name="GID_POP_CRASH")
COUNT = 200
INVISIBLE_S = 3


def start(workdir: Path, store: Path) -> ServerProcess:
    conf = workdir / "broker.conf"
    conf.write_text("minInvisibleTimeMillsForRecv=1000\n")
    return ServerProcess(
        "serve", workdir, "-c", str(conf), "--store", str(store), "--namesrv-port", "0",
        "--broker-port", "0", listen=False,
    )  # fmt: skip


async def receive(stub: MessagingServiceStub, poll_s: float = 1.0) -> list[pb.Message]:
    request = svc.ReceiveMessageRequest(
        group=GROUP, message_queue=pb.MessageQueue(topic=TOPIC, id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=16,
        invisible_duration=Duration(seconds=INVISIBLE_S),
        long_polling_timeout=Duration(nanos=int(poll_s * 1e9)),
    )  # fmt: skip
    got = []
    async for response in stub.ReceiveMessage(request, metadata=META, timeout=poll_s + 5):
        if response.WhichOneof("content") == "message":
            got.append(response.message)
        elif response.WhichOneof("content") == "status":
            assert response.status.code in (pb.OK, pb.MESSAGE_NOT_FOUND), response.status
    return got


async def ack(stub: MessagingServiceStub, message: pb.Message) -> None:
    entry = svc.AckMessageEntry(
        message_id=message.system_properties.message_id,
        receipt_handle=message.system_properties.receipt_handle,
    )
    response = await stub.AckMessage(
        svc.AckMessageRequest(group=GROUP, topic=TOPIC, entries=[entry]), metadata=META,
        timeout=5,
    )  # fmt: skip
    assert response.status.code == pb.OK, response.status


async def test_in_flight_messages_survive_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = start(tmp_path, store)
    subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n",
         f"127.0.0.1:{server.ready['namesrv']}", "update-topic", "-t", TOPIC.name],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    sent: set[str] = set()
    acked: set[str] = set()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ready['grpc']}") as channel:
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            assert await receive(stub, 0.2) == []  # the group starts before the sends
            for i in range(COUNT):
                message_id = uuid.uuid4().hex.upper()
                response = await stub.SendMessage(
                    svc.SendMessageRequest(messages=[pb.Message(
                        topic=TOPIC, body=f"m{i}".encode(),
                        system_properties=pb.SystemProperties(
                            message_id=message_id, message_type=pb.NORMAL
                        ),
                    )]),
                    metadata=META, timeout=5,
                )  # fmt: skip
                assert response.status.code == pb.OK, response.status
                sent.add(message_id)
            while len(acked) < COUNT // 2:
                for message in await receive(stub):
                    await ack(stub, message)
                    acked.add(message.system_properties.message_id)
            in_flight = await receive(stub)
            received_at = time.monotonic()
            assert in_flight
    finally:
        server.proc.kill()
        server.proc.wait()
        server.stop()

    server = start(tmp_path, store)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ready['grpc']}") as channel:
            stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            pending = {m.system_properties.message_id for m in in_flight}
            deadline = time.monotonic() + 60
            while acked != sent and time.monotonic() < deadline:
                for message in await receive(stub):
                    sp = message.system_properties
                    if sp.message_id in pending:
                        pending.discard(sp.message_id)
                        assert sp.delivery_attempt == 2
                        assert time.monotonic() - received_at >= INVISIBLE_S - 0.2
                    await ack(stub, message)
                    acked.add(sp.message_id)
            assert acked == sent, f"{len(sent - acked)} of {COUNT} never delivered"
            assert not pending
    finally:
        assert server.stop() == 0, server.log_path.read_text()
