"""What clients send besides sends and pulls, against ``pocketmq serve`` as a real process:
the properties the broker stamps on every message (4.x and 5.x sends)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from server_procs import ServerProcess

from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    MessageExt,
    Producer,
    PushConsumer,
    message,
)
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol.message import MessageConst

pytestmark = pytest.mark.integration

# Short client intervals so that rebalances and offset commits happen within a test.
FAST: dict[str, Any] = {
    "rebalance_interval_s": 1.0,
    "persist_interval_s": 0.5,
    "broker_suspend_ms": 1000,
}


class Servers:
    def __init__(self, ready: dict[str, int]) -> None:
        self.namesrv = f"127.0.0.1:{ready['namesrv']}"
        self.broker = f"127.0.0.1:{ready['broker']}"
        self.grpc = f"127.0.0.1:{ready['grpc']}"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    workdir = tmp_path_factory.mktemp("serve")
    proc = ServerProcess(
        "serve", workdir, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        yield Servers(proc.ready)
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return "T_" + request.node.name.replace("[", "_").replace("]", "")[:60]


@pytest.fixture
async def producer(servers: Servers) -> AsyncIterator[Producer]:
    async with Producer("PG_REQUESTS", servers.namesrv) as p:
        yield p


class Collector:
    """A listener that records what it gets and can wait for a count."""

    def __init__(self) -> None:
        self.got: list[MessageExt] = []
        self.changed = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        self.got += msgs
        self.changed.set()
        return ConsumeResult.CONSUME_SUCCESS

    async def wait_for(self, count: int, timeout_s: float = 20) -> None:
        async with asyncio.timeout(timeout_s):
            while len(self.got) < count:
                self.changed.clear()
                await self.changed.wait()


def consumer_of(servers: Servers, group: str, topic: str, listener: Any) -> PushConsumer:
    consumer = PushConsumer(
        group, servers.namesrv, listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    return consumer


async def test_4x_and_5x_sends_are_consumed_with_the_brokers_cluster(
    servers: Servers, producer: Producer, topic: str
) -> None:
    await producer.send(message(topic, b"from-4x"))
    async with grpc.aio.insecure_channel(servers.grpc) as channel:
        stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        sent = await stub.SendMessage(
            svc.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name=topic), body=b"from-5x",
                system_properties=pb.SystemProperties(
                    message_id=uuid.uuid4().hex.upper(), message_type=pb.NORMAL),
            )]),
            metadata=(("x-mq-client-id", "test-client@1@0@abc"),), timeout=10,
        )  # fmt: skip
        assert sent.status.code == pb.OK, sent.status
    collector = Collector()
    async with consumer_of(servers, "CG_CLUSTER", topic, collector):
        await collector.wait_for(2)
    assert sorted(m.body for m in collector.got) == [b"from-4x", b"from-5x"]
    for m in collector.got:
        assert m.properties[MessageConst.CLUSTER] == "DefaultCluster"
        assert m.properties[MessageConst.MSG_REGION] == "DefaultRegion"
        assert m.properties[MessageConst.TRACE_SWITCH] == "true"
