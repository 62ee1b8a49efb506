"""What clients send besides sends and pulls, against ``pocketmq serve`` as a real process:
the properties the broker stamps on every message (4.x and 5.x sends), request-reply, and the
admin requests the broker passes on to live consumers (offset reset by time, running info,
consume-directly), also through ``pocketmq admin``."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from client_helpers import FAST, Collector
from server_procs import ServerProcess

from pocketmq.client import (
    BlockingProducer,
    BlockingPushConsumer,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    Producer,
    PushConsumer,
    message,
)
from pocketmq.errors import BrokerError, ClientError, RequestTimeoutError
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, decode_offset_msg_id
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration


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


async def _admin(servers: Servers, code: int, header: dict[str, Any]) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(servers.broker, RemotingCommand.request(code, header), 15)
    finally:
        await client.close()


async def _send_spaced(producer: Producer, topic: str) -> int:
    """Five messages, then a time, then five more: returns that time (epoch ms)."""
    for i in range(5):
        await producer.send(message(topic, f"old-{i}"))
    cut_ms = time.time_ns() // 1_000_000 + 1
    # The cut must fall strictly between the two batches' store times (ms resolution).
    await wait_until(lambda: time.time_ns() // 1_000_000 > cut_ms, 1, "the clock to pass the cut")
    for i in range(5):
        await producer.send(message(topic, f"new-{i}"))
    return cut_ms


async def _committed(servers: Servers, group: str, topic: str) -> int:
    """The sum of the group's committed offsets in the topic."""
    resp = await _admin(
        servers, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic}
    )
    table = json_body.loads(resp.body)["offsetTable"]
    return sum(int(v["consumerOffset"]) for v in table.values())


async def test_reset_offset_by_time_moves_a_live_push_consumer(
    servers: Servers, producer: Producer, topic: str
) -> None:
    cut_ms = await _send_spaced(producer, topic)
    collector = Collector()
    header = {"topic": topic, "group": "CG_RESET", "timestamp": cut_ms, "isForce": False}
    async with consumer_of(servers, "CG_RESET", topic, collector):
        await collector.wait_for(10)

        async def all_committed() -> bool:
            return await _committed(servers, "CG_RESET", topic) == 10

        await wait_until(all_committed, 10, "the group's offsets committed")
        resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        table = json_body.loads(resp.body)["offsetTable"]
        assert sum(table.values()) == 5  # each queue back at its first "new" message
        await collector.wait_for(15)
        assert sorted(m.body for m in collector.got[10:]) == [b"new-%d" % i for i in range(5)]
        await wait_until(all_committed, 10, "the re-consumed offsets committed")

        # Not forced, a later time never moves the group forward; forced, it does.
        later = {**header, "timestamp": -1}
        resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, later)
        assert sum(json_body.loads(resp.body)["offsetTable"].values()) == 10
        back = {**header, "timestamp": 0, "isForce": True}
        resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, back)
        assert sum(json_body.loads(resp.body)["offsetTable"].values()) == 0
        await collector.wait_for(25)
        assert sorted(m.body for m in collector.got[15:]) == sorted(
            m.body for m in collector.got[:10]
        )
    resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
    assert resp.code == ResponseCode.CONSUMER_NOT_ONLINE, resp.remark
    resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                        {**header, "topic": "NoSuchTopic"})  # fmt: skip
    # Broker2Client.resetOffset: SYSTEM_ERROR, "no topic in this broker".
    assert resp.code == ResponseCode.SYSTEM_ERROR and "no topic in this broker" in resp.remark


async def test_reset_offset_moves_a_live_lite_pull_consumer(
    servers: Servers, producer: Producer, topic: str
) -> None:
    cut_ms = await _send_spaced(producer, topic)
    consumer = LitePullConsumer(
        "CG_RESET_LITE", servers.namesrv, auto_commit=True,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    async with consumer:
        polled: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(polled) < 10:
                polled += await consumer.poll(1)

        async def all_committed() -> bool:
            return await _committed(servers, "CG_RESET_LITE", topic) == 10

        await wait_until(all_committed, 10, "the polled offsets committed")
        header = {"topic": topic, "group": "CG_RESET_LITE", "timestamp": cut_ms, "isForce": False}
        resp = await _admin(servers, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        again: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(again) < 5:
                again += await consumer.poll(1)
        assert sorted(m.body for m in again) == [b"new-%d" % i for i in range(5)]


async def test_running_info_and_consume_directly_reach_the_named_consumer(
    servers: Servers, producer: Producer, topic: str
) -> None:
    sent = await producer.send(message(topic, "direct", tags="D"))
    collector = Collector()
    consumer = consumer_of(servers, "CG_ADMIN", topic, collector)
    async with consumer:
        await collector.wait_for(1)
        who = {"consumerGroup": "CG_ADMIN", "clientId": consumer.client_id}
        resp = await _admin(servers, RequestCode.GET_CONSUMER_RUNNING_INFO,
                            {**who, "jstackEnable": False})  # fmt: skip
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        info = json_body.loads(resp.body)
        assert info["properties"]["consumerGroup"] == "CG_ADMIN"
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info["properties"]["PROP_NAMESERVER_ADDR"] == servers.namesrv
        assert topic in {s["topic"] for s in info["subscriptionSet"]}
        held = [json_body.parse_message_queue_key(k) for k in info["mqTable"]]
        assert sorted(q for t, _, q in held if t == topic) == [0, 1, 2, 3]

        direct = {**who, "msgId": sent.offset_msg_id, "brokerName": "broker-a"}
        resp = await _admin(servers, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        result = json_body.loads(resp.body)
        assert (result["consumeResult"], result["order"], result["autoCommit"]) == (
            "CR_SUCCESS", False, True)  # fmt: skip
        assert [m.body for m in collector.got] == [b"direct", b"direct"]

        gone = {**who, "clientId": "127.0.0.1@gone"}
        resp = await _admin(servers, RequestCode.GET_CONSUMER_RUNNING_INFO, gone)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "The Consumer <CG_ADMIN> <127.0.0.1@gone> not online"
        # The same client, in a group it does not consume: not online either.
        resp = await _admin(servers, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                            {**direct, "consumerGroup": "CG_OTHER"})  # fmt: skip
        assert resp.code == ResponseCode.SYSTEM_ERROR and "not online" in (resp.remark or "")


async def _cli(servers: Servers, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pocketmq.cli", "admin", "-n", servers.namesrv, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_admin_cli_resets_and_reports_a_live_group(
    servers: Servers, producer: Producer, topic: str
) -> None:
    cut_ms = await _send_spaced(producer, topic)
    collector = Collector()
    consumer = consumer_of(servers, "CG_CLI", topic, collector)
    async with consumer:
        await collector.wait_for(10)
        status = json.loads(await _cli(servers, "consumer-status", "-g", "CG_CLI", "--json"))
        assert list(status) == [consumer.client_id]
        assert status[consumer.client_id]["properties"]["consumerGroup"] == "CG_CLI"

        async def all_committed() -> bool:
            return await _committed(servers, "CG_CLI", topic) == 10

        await wait_until(all_committed, 10, "the group's offsets committed")
        rows = json.loads(await _cli(servers, "reset-offset-by-time", "-g", "CG_CLI",
                                     "-t", topic, "-s", str(cut_ms), "--json"))  # fmt: skip
        table = {f"{r['broker']}:{r['queue']}": r["offset"] for r in rows}
        assert sorted(table) == [f"broker-a:{q}" for q in range(4)]
        assert sum(table.values()) == 5
        await collector.wait_for(15)
        assert sorted(m.body for m in collector.got[10:]) == [b"new-%d" % i for i in range(5)]


def _records(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos : pos + 4], "big")
        out.append(decode_message(body[pos : pos + size], check_crc=True))
        pos += size
    return out


async def test_query_message_by_key_and_unique_key_and_view_by_id(
    servers: Servers, producer: Producer, topic: str
) -> None:
    first = await producer.send(message(topic, "a", keys=["order-1", "customer-9"]))
    await producer.send(message(topic, "b", keys="order-2"))
    # A producer that resends after a lost answer stores one UNIQ_KEY twice.
    dup = message(topic, "dup")
    dup.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = "DUPLICATED-ID"
    await producer.send(dup)
    await producer.send(dup)
    await producer.send_batch([message(topic, f"many-{i}", keys="many") for i in range(70)])

    def query(key: str, max_num: int = 32, unique: bool | None = None,
              begin: int = 0, end: int = 2**62) -> dict[str, Any]:  # fmt: skip
        header: dict[str, Any] = {"topic": topic, "key": key, "maxNum": max_num,
                                  "beginTimestamp": begin, "endTimestamp": end}  # fmt: skip
        if unique is not None:
            header["_UNIQUE_KEY_QUERY"] = unique
        return header

    async def found(key: str) -> bool:
        resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query(key))
        return resp.code == ResponseCode.SUCCESS

    await wait_until(lambda: found("many"), 10, "the index to hold the last send")
    resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query("customer-9"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert int(resp.ext_fields["indexLastUpdateTimestamp"]) > 0
    assert int(resp.ext_fields["indexLastUpdatePhyoffset"]) > 0
    [hit] = _records(resp.body)
    assert (hit.topic, hit.body, hit.keys) == (topic, b"a", "order-1 customer-9")

    resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query(first.msg_id, unique=True))
    assert [m.body for m in _records(resp.body)] == [b"a"]
    # maxNum is the caller's for a key query, RocketMQ's 32 for a unique key query.
    resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query("DUPLICATED-ID", 1))
    assert [m.body for m in _records(resp.body)] == [b"dup"]
    resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query("DUPLICATED-ID", 1, True))
    assert [m.body for m in _records(resp.body)] == [b"dup", b"dup"]

    # No query returns more than RocketMQ's maxMsgsNumBatch.
    resp = await _admin(servers, RequestCode.QUERY_MESSAGE, query("many", 100))
    assert len(_records(resp.body)) == 64

    for missing in (query("order-3"), query("order-1", end=1)):
        resp = await _admin(servers, RequestCode.QUERY_MESSAGE, missing)
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        assert resp.remark == "can not find message, maybe time range not correct"

    _, phy_offset = decode_offset_msg_id(first.offset_msg_id)
    resp = await _admin(servers, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [viewed] = _records(resp.body)
    assert (viewed.body, viewed.uniq_key, viewed.phy_offset) == (b"a", first.msg_id, phy_offset)
    resp = await _admin(servers, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset + 1})
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == f"can not find message by the offset, {phy_offset + 1}"
