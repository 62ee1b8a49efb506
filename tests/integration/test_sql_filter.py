"""SQL92 filtering over remoting, against `pocketmq serve` as a real process: our consumers
subscribed by SQL92 get exactly the matching messages; a malformed selector is refused with
RocketMQ's code (at consumer start through CHECK_CLIENT_CONFIG, and on a pull); a pull that
does not carry its subscription (a Java push consumer's default) is filtered with the one the
group's heartbeat registered, and refused when that one is older than the pull's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from client_helpers import FAST_FROM_FIRST
from server_procs import ServerProcess

from pocketmq.client import (
    ConsumeContext,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    MessageSelector,
    Producer,
    PushConsumer,
    message,
)
from pocketmq.errors import BrokerError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import PullSysFlag
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration

SELECTOR = "n >= 10 AND (TAGS = 'A' OR region IN ('eu', 'us')) AND skip IS NULL"


def matches(i: int) -> bool:
    return i >= 10 and (i % 2 == 0 or i % 3 == 0) and i % 7 != 0


def sample(topic: str, i: int) -> Any:
    props = {"n": str(i)}
    if i % 3 == 0:
        props["region"] = "eu" if i % 2 else "us"
    if i % 7 == 0:
        props["skip"] = "1"
    return message(topic, f"m{i}", tags="A" if i % 2 == 0 else "B", properties=props)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        "serve", tmp_path_factory.mktemp("serve"), "--namesrv-port", "0", "--broker-port", "0",
        listen=False,
    )  # fmt: skip
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


def namesrv(proc: ServerProcess) -> str:
    return f"127.0.0.1:{proc.ready['namesrv']}"


def broker(proc: ServerProcess) -> str:
    return f"127.0.0.1:{proc.ready['broker']}"


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return "SQL_" + request.node.name[:60]


@pytest.fixture
async def sent(server: ServerProcess, topic: str) -> AsyncIterator[set[bytes]]:
    """40 messages on the topic; yields the bodies the selector matches."""
    async with Producer("PG_SQL", namesrv(server)) as producer:
        for i in range(40):
            await producer.send(sample(topic, i))
    yield {f"m{i}".encode() for i in range(40) if matches(i)}


async def test_a_push_consumer_subscribed_by_sql_gets_exactly_the_matching_messages(
    server: ServerProcess, topic: str, sent: set[bytes]
) -> None:
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("CG_SQL_PUSH", namesrv(server), listener=listener, **FAST_FROM_FIRST)
    consumer.subscribe(topic, MessageSelector.by_sql(SELECTOR))
    await consumer.start()
    try:
        # Every message has been pulled past once the offsets reach the end of the queues.
        await wait_until(lambda: scanned(consumer, topic) == 40, 20, "all 40 scanned")
        await wait_until(lambda: len(got) >= len(sent), 20, "the matching messages")
    finally:
        await consumer.shutdown()
    assert sorted(m.body for m in got) == sorted(sent)


def scanned(consumer: PushConsumer, topic: str) -> int:
    return sum(o for mq, o in consumer.offset_store.offsets.items() if mq.topic == topic)


async def test_a_lite_pull_consumer_subscribed_by_sql_polls_only_matches(
    server: ServerProcess, topic: str, sent: set[bytes]
) -> None:
    consumer = LitePullConsumer("CG_SQL_LITE", namesrv(server), **FAST_FROM_FIRST)
    consumer.subscribe(topic, MessageSelector.by_sql(SELECTOR))
    got: set[bytes] = set()
    await consumer.start()
    try:

        async def polled_all() -> bool:
            got.update(m.body for m in await consumer.poll(0.5))
            return got >= sent

        await wait_until(polled_all, 20, "the matching messages")
    finally:
        await consumer.shutdown()
    assert got == sent


async def test_a_malformed_selector_fails_the_consumer_start_with_the_broker_error(
    server: ServerProcess, topic: str, sent: set[bytes]
) -> None:
    consumer = PushConsumer("CG_SQL_BAD", namesrv(server), listener=lambda m, c: None)
    consumer.subscribe(topic, MessageSelector.by_sql("n >> 5"))
    with pytest.raises(BrokerError) as info:
        await consumer.start()
    assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "unexpected '>'" in info.value.remark
    assert not consumer.running


async def invoke(addr: str, code: int, fields: dict[str, Any], body: Any = None) -> Any:
    client = RemotingClient()
    try:
        data = b"" if body is None else json.dumps(body).encode()
        return await client.invoke(addr, RemotingCommand.request(code, fields, data), 5)
    finally:
        await client.close()


def pull_fields(topic: str, group: str, sys_flag: int, **extra: Any) -> dict[str, Any]:
    return {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 64, "sysFlag": sys_flag, "commitOffset": 0,
            "suspendTimeoutMillis": 0, "subVersion": 0, **extra}  # fmt: skip


def bodies(body: bytes) -> set[bytes]:
    out, pos = set(), 0
    while pos < len(body):
        msg = decode_message(body, pos)
        out.add(msg.body)
        pos += msg.store_size
    return out


async def test_a_pull_with_a_malformed_selector_is_refused_with_rocketmq_s_code(
    server: ServerProcess, topic: str, sent: set[bytes]
) -> None:
    fields = pull_fields(topic, "CG_SQL_RAW", PullSysFlag.SUBSCRIPTION,
                         subscription="n BETWEEN 5 AND 1", expressionType="SQL92")  # fmt: skip
    resp = await invoke(broker(server), RequestCode.PULL_MESSAGE, fields)
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert resp.remark.startswith("parse the consumer's subscription failed")
    check = {"clientId": "raw@1", "group": "CG_SQL_RAW", "subscriptionData": {
        "topic": topic, "subString": "n BETWEEN 5 AND 1", "expressionType": "SQL92",
        "subVersion": 1}}  # fmt: skip
    resp = await invoke(broker(server), RequestCode.CHECK_CLIENT_CONFIG, {}, check)
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "must less than or equal to" in resp.remark


async def test_a_pull_without_its_subscription_is_filtered_by_the_heartbeat_one(
    server: ServerProcess, topic: str, sent: set[bytes]
) -> None:
    group = "CG_SQL_HEARTBEAT"
    client = RemotingClient()
    try:
        addr = broker(server)
        sub = {
            "topic": topic,
            "subString": SELECTOR,
            "expressionType": "SQL92",
            "subVersion": 1000,
            "tagsSet": [],
            "codeSet": [],
            "classFilterMode": False,
        }
        heartbeat = {"clientID": "java-like@1", "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "subscriptionDataSet": [sub], "unitMode": False}]}  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode())
        assert (await client.invoke(addr, cmd, 5)).code == ResponseCode.SUCCESS
        got: set[bytes] = set()
        for queue_id in range(4):
            fields = pull_fields(topic, group, 0, queueId=queue_id, subVersion=1000)
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
            resp = await client.invoke(addr, pull, 5)
            assert resp.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                 ResponseCode.PULL_RETRY_IMMEDIATELY), resp.remark  # fmt: skip
            got |= bodies(resp.body)
        assert got == sent
        fields = pull_fields(topic, group, 0, subVersion=1001)
        resp = await client.invoke(
            addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, fields), 5
        )
        assert (resp.code, resp.remark) == (
            ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        )  # fmt: skip
    finally:
        await client.close()
