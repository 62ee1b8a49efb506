"""5.x transactions on the gRPC endpoint of ``pocketmq serve`` (a real process), driven with
pocketmq's generated stubs: a half message is invisible until its EndTransaction commits it,
a rolled-back one never appears, an open one is checked back over the producer's Telemetry
stream (while the producer writes nothing) and its SOURCE_SERVER_CHECK answer commits it;
refused EndTransactions get the proxy's codes; a topic's ``message.type`` decides what its
route accepts and which sends it takes.

This process must not import the 5.x client (``rocketmq``): both register the same
``apache.rocketmq.v2`` protobuf names.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from server_procs import ServerProcess

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol.message import create_offset_msg_id

pytestmark = pytest.mark.integration
TIMEOUT_S = 10
META = (("x-mq-client-id", "tx-client@1@0@abc"), ("x-mq-request-id", str(uuid.uuid4())))
# Halves are checked after 1 s, every second.
BROKER_CONF = "transactionTimeOut=1000\ntransactionCheckInterval=1000\n"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    workdir = tmp_path_factory.mktemp("serve")
    conf = workdir / "broker.conf"
    conf.write_text(BROKER_CONF)
    proc = ServerProcess(
        "serve", workdir, "-c", str(conf), "--namesrv-port", "0", "--broker-port", "0",
        listen=False,
    )  # fmt: skip
    try:
        yield proc.ready
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


@pytest.fixture
async def stub(serve: dict[str, int]) -> AsyncIterator[MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{serve['grpc']}") as channel:
        yield MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


def create_topic(serve: dict[str, int], topic: str, *extra: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", f"127.0.0.1:{serve['namesrv']}",
         "update-topic", "-t", topic, "-r", "1", "-w", "1", *extra],
        capture_output=True, text=True, timeout=60, env={**os.environ},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def half(topic: str, body: bytes, kind: pb.MessageType = pb.TRANSACTION) -> pb.Message:
    born = Timestamp()
    born.GetCurrentTime()  # the check-back's timeout runs from the message's birth
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        system_properties=pb.SystemProperties(
            message_id=uuid.uuid4().hex.upper(), message_type=kind, born_timestamp=born
        ),
    )


async def send(stub: MessagingServiceStub, msg: pb.Message) -> svc.SendResultEntry:
    response = await stub.SendMessage(
        svc.SendMessageRequest(messages=[msg]), metadata=META, timeout=TIMEOUT_S
    )
    entry: svc.SendResultEntry = response.entries[0]
    return entry


async def end(
    stub: MessagingServiceStub,
    topic: str,
    message_id: str,
    transaction_id: str,
    resolution: int = pb.COMMIT,
    source: int = pb.SOURCE_CLIENT,
) -> pb.Status:
    response = await stub.EndTransaction(
        svc.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id=message_id, transaction_id=transaction_id,
            resolution=resolution, source=source,
        ),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    status: pb.Status = response.status
    return status


async def bodies(stub: MessagingServiceStub, topic: str) -> list[bytes]:
    """Every body queue 0 of the topic holds, read with PullMessage from offset 0."""
    request = svc.PullMessageRequest(
        group=pb.Resource(name="GID_TX_READER"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        offset=0, batch_size=32, long_polling_timeout={"seconds": 0},
    )  # fmt: skip
    got: list[bytes] = []
    async for r in stub.PullMessage(request, metadata=META, timeout=TIMEOUT_S):
        if r.WhichOneof("content") == "message":
            got.append(r.message.body)
    return got


async def test_commit_rollback_and_a_check_back(
    serve: dict[str, int], stub: MessagingServiceStub
) -> None:
    topic = "GrpcTxTopic"
    create_topic(serve, topic, "-a", "+message.type=TRANSACTION")
    producer = stub.Telemetry(metadata=META, timeout=60)
    settings = pb.Settings(
        client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)])
    )
    await producer.write(svc.TelemetryCommand(settings=settings))
    assert (await producer.read()).status.code == pb.OK

    sent = {}
    for body in (b"commit", b"rollback", b"open"):
        msg = half(topic, body)
        entry = await send(stub, msg)
        assert entry.status.code == pb.OK, entry.status
        assert entry.message_id == msg.system_properties.message_id
        assert entry.transaction_id and entry.transaction_id != entry.message_id
        sent[body] = entry
    assert await bodies(stub, topic) == []  # halves are invisible

    commit, rollback = sent[b"commit"], sent[b"rollback"]
    assert (await end(stub, topic, commit.message_id, commit.transaction_id)).code == pb.OK
    status = await end(stub, topic, rollback.message_id, rollback.transaction_id, pb.ROLLBACK)
    assert status.code == pb.OK
    assert await bodies(stub, topic) == [b"commit"]

    # The open half is checked back on the stream while the producer writes nothing.
    async with asyncio.timeout(20):
        command = await producer.read()
    assert command.WhichOneof("command") == "recover_orphaned_transaction_command"
    check = command.recover_orphaned_transaction_command
    assert check.message.body == b"open"
    assert check.message.topic.name == topic
    assert check.message.system_properties.message_id == sent[b"open"].message_id
    assert check.message.system_properties.message_type == pb.TRANSACTION
    status = await end(stub, topic, check.message.system_properties.message_id,
                       check.transaction_id, pb.COMMIT, pb.SOURCE_SERVER_CHECK)  # fmt: skip
    assert status.code == pb.OK
    assert await bodies(stub, topic) == [b"commit", b"open"]
    producer.cancel()


async def test_refused_end_transactions(serve: dict[str, int], stub: MessagingServiceStub) -> None:
    topic = "GrpcTxRefused"
    create_topic(serve, topic)
    entry = await send(stub, half(topic, b"x"))
    assert entry.status.code == pb.OK, entry.status
    cases: list[tuple[dict[str, Any], int]] = [
        ({"transaction_id": ""}, pb.INVALID_TRANSACTION_ID),
        ({"transaction_id": "not-hex"}, pb.INVALID_TRANSACTION_ID),
        ({"message_id": ""}, pb.ILLEGAL_MESSAGE_ID),
        ({"topic": "bad topic!"}, pb.ILLEGAL_TOPIC),
        ({"resolution": 7}, pb.BAD_REQUEST),
        ({"source": 9}, pb.BAD_REQUEST),
        # No half at that offset.
        ({"transaction_id": create_offset_msg_id(("127.0.0.1", 1), 1 << 40)},
         pb.INTERNAL_SERVER_ERROR),
        # The half's producer group is its own topic.
        ({"topic": "GrpcTxOther"}, pb.INTERNAL_SERVER_ERROR),
    ]  # fmt: skip
    for change, code in cases:
        args = {"topic": topic, "message_id": entry.message_id,
                "transaction_id": entry.transaction_id, **change}  # fmt: skip
        status = await end(stub, **args)
        assert status.code == code, (change, status)
    assert await bodies(stub, topic) == []
    assert (await end(stub, topic, entry.message_id, entry.transaction_id)).code == pb.OK
    assert await bodies(stub, topic) == [b"x"]
    # Resolved once: a rollback after the commit is refused and changes nothing.
    late = await end(stub, topic, entry.message_id, entry.transaction_id, pb.ROLLBACK)
    assert late.code == pb.BAD_REQUEST, late
    assert await bodies(stub, topic) == [b"x"]


async def test_a_topics_message_type(serve: dict[str, int], stub: MessagingServiceStub) -> None:
    topic = "GrpcNormalOnly"
    create_topic(serve, topic, "-a", "+message.type=NORMAL")
    route = await stub.QueryRoute(
        svc.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=META, timeout=TIMEOUT_S
    )
    assert [list(q.accept_message_types) for q in route.message_queues] == [[pb.NORMAL]]
    refused = await send(stub, half(topic, b"t"))
    assert refused.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is NORMAL, but actual type is TRANSACTION" in refused.status.message
    assert (await send(stub, half(topic, b"n", pb.NORMAL))).status.code == pb.OK
    assert await bodies(stub, topic) == [b"n"]
