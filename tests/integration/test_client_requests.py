"""What clients send besides sends and pulls, against ``pocketmq serve`` as a real process:
the properties the broker stamps on every message (4.x and 5.x sends), request-reply."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from server_procs import ServerProcess

from pocketmq.client import (
    BlockingProducer,
    BlockingPushConsumer,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    MessageExt,
    Producer,
    PushConsumer,
    message,
)
from pocketmq.errors import BrokerError, ClientError, RequestTimeoutError
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol.codes import ResponseCode
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


async def test_request_reply_round_trip_and_a_timeout(
    servers: Servers, producer: Producer, topic: str
) -> None:
    replied: list[MessageExt] = []
    # The topic exists before the consumer starts, so that its first heartbeat reaches the
    # broker (a consumer heartbeats the brokers of the routes it knows).
    await producer.send(message(topic, "ignore me"))
    async with Producer("PG_REPLIER", servers.namesrv) as replier:

        async def answer(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            for m in msgs:
                if m.body != b"ignore me":
                    await replier.reply(m, b"re: " + m.body, {"who": "replier"})
                replied.append(m)
            return ConsumeResult.CONSUME_SUCCESS

        async with consumer_of(servers, "CG_REPLIER", topic, answer):
            for i in range(3):
                got = await producer.request(message(topic, f"q{i}", tags="Ask"), 10_000)
                assert got.body == f"re: q{i}".encode()
                assert got.topic == "DefaultCluster_REPLY_TOPIC"
                assert got.properties["who"] == "replier"
                assert got.properties[MessageConst.MESSAGE_TYPE] == "reply"
                assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in got.properties
            request = replied[-1]
            assert request.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] == (
                producer.instance.client_id
            )
            assert request.properties[MessageConst.MESSAGE_TTL] == "10000"
            with pytest.raises(RequestTimeoutError, match="wait reply message timeout, 1500 ms"):
                await producer.request(message(topic, "ignore me"), 1500)

            # A reply whose requester is gone is refused with RocketMQ's code and remark.
            gone = MessageExt(topic=topic, body=b"x", properties=dict(request.properties))
            gone.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = "127.0.0.1@gone"
            # (SYSTEM_ERROR is retried on another broker, as RocketMQ's producer does.)
            with pytest.raises(ClientError, match=r"channel of <127\.0\.0\.1@gone> not") as err:
                await replier.reply(gone, b"late")
            cause = err.value.__cause__
            assert isinstance(cause, BrokerError) and cause.code == ResponseCode.SYSTEM_ERROR
            with pytest.raises(ClientError, match=r"property\[CLUSTER\] is null"):
                await replier.reply(MessageExt(topic=topic, body=b"not stored"), b"x")


def test_blocking_request_reply(servers: Servers, topic: str) -> None:
    with BlockingProducer("PG_BLOCKING_REPLIER", servers.namesrv) as replier:
        replier.send(message(topic, "create the topic"))

        def answer(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            for m in msgs:
                if MessageConst.CORRELATION_ID in m.properties:
                    replier.reply(m, m.body.upper())
            return ConsumeResult.CONSUME_SUCCESS

        consumer = BlockingPushConsumer(
            "CG_BLOCKING_REPLIER", servers.namesrv, listener=answer,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
        )  # fmt: skip
        consumer.subscribe(topic)
        with consumer, BlockingProducer("PG_BLOCKING_REQUESTER", servers.namesrv) as requester:
            assert requester.request(message(topic, "ping"), 10_000).body == b"PING"
