"""Subscriptions on the broker, in process: a pull filters with the subscription it carries
(FLAG_SUBSCRIPTION) or with the one its group's heartbeats registered, with
PullMessageProcessor's codes, remarks and order of checks (consumeEnable, subVersion, a missing
group or topic, a selector that does not compile, enablePropertyFilter); heartbeats keep the
newest subscription per topic; CHECK_CLIENT_CONFIG answers as ClientManageProcessor does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from broker_parts import messaging_with_topic

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.consumers import ConsumerManager
from pocketmq.broker.filtering import FilterNotSupported
from pocketmq.broker.handlers.clients import ClientHandlers
from pocketmq.broker.handlers.pull import PullHandlers
from pocketmq.broker.messaging import MessagingService
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.transaction.producers import ProducerRegistry
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, PullSysFlag
from pocketmq.protocol.names import SubscriptionData
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

TOPIC, GROUP = "Orders", "GID_ORDERS"
SQL = "amount > 5 AND TAGS <> 'skip'"


class FakeTransport(asyncio.Transport):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4000) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MessagingService]:
    service = messaging_with_topic(tmp_path, TOPIC, 1)
    clock = FakeClock()
    service.broker.consumers = ConsumerManager(120_000, clock=clock)
    service.broker.messaging = service
    for i, tag in enumerate(["keep", "skip", "keep", "keep", "keep", "keep", "keep", "keep"]):
        await service.send(
            MessageExt(topic=TOPIC, body=str(i).encode(), store_host=service.store_host,
                       properties={MessageConst.TAGS: tag, "amount": str(i)})
        )  # fmt: skip
    yield service
    service.store.close()


def channel() -> RemotingChannel:
    ch = RemotingChannel()
    ch.connection_made(FakeTransport())
    return ch


def subscription(expression: str = SQL, kind: str = "SQL92", version: int = 10) -> dict[str, Any]:
    return {
        "topic": TOPIC, "subString": expression, "expressionType": kind, "subVersion": version,
        "tagsSet": [], "codeSet": [], "classFilterMode": False,
    }  # fmt: skip


def heartbeat(*subs: dict[str, Any], model: str = "CLUSTERING") -> RemotingCommand:
    consumer = {"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": list(subs)}  # fmt: skip
    body = {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [consumer]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


def pull_request(sys_flag: int, sub_version: int = 0, **extra: Any) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "queueOffset": 0,
         "maxMsgNums": 32, "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": 0,
         "subVersion": sub_version, **extra},
    )  # fmt: skip


def handlers(service: MessagingService) -> tuple[ClientHandlers, PullHandlers]:
    broker: Any = SimpleNamespace(
        config=service.config, messaging=service, consumers=service.broker.consumers,
        producers=ProducerRegistry(120_000),
    )  # fmt: skip
    return ClientHandlers(broker), PullHandlers(broker)


def bodies(resp: RemotingCommand) -> list[bytes]:
    out, pos = [], 0
    while pos < len(resp.body):
        msg = decode_message(resp.body, pos)
        out.append(msg.body)
        pos += msg.store_size
    return out


async def refused(call: Any) -> RequestError:
    with pytest.raises(RequestError) as info:
        await call if asyncio.iscoroutine(call) else call()
    return info.value


# --- pulls that carry their subscription ---------------------------------------------------


async def test_a_pull_carrying_a_sql92_subscription_gets_exactly_the_matching_messages(
    service: MessagingService,
) -> None:
    _, pulls = handlers(service)
    flags = PullSysFlag.SUBSCRIPTION
    resp = await pulls.pull_message(
        channel(), pull_request(flags, subscription=SQL, expressionType="SQL92")
    )
    assert resp.code == ResponseCode.SUCCESS
    assert bodies(resp) == [b"6", b"7"]
    assert resp.ext_fields["nextBeginOffset"] == "8"


async def test_a_bad_selector_is_subscription_parse_failed_with_rocketmq_s_remark(
    service: MessagingService,
) -> None:
    _, pulls = handlers(service)
    cmd = pull_request(PullSysFlag.SUBSCRIPTION, subscription="amount >", expressionType="SQL92")
    exc = await refused(pulls.pull_message(channel(), cmd))
    assert exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert exc.remark.startswith("parse the consumer's subscription failed")
    assert "unexpected end of the expression" in exc.remark


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (SubscriptionData(TOPIC, "", "SQL92"), "Expression can't be null! SQL92"),
        (SubscriptionData(TOPIC, "a > 1", "GROOVY"), "expression type 'GROOVY'"),
    ],
)
async def test_empty_selectors_and_unknown_types_are_refused(
    service: MessagingService, data: SubscriptionData, detail: str
) -> None:
    with pytest.raises(RequestError) as info:
        service.subscription(data)
    assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert detail in info.value.remark


async def test_sql92_is_refused_as_rocketmq_refuses_it_when_property_filtering_is_off(
    service: MessagingService,
) -> None:
    service.config = BrokerConfig(enable_property_filter=False)
    with pytest.raises(FilterNotSupported) as info:
        service.subscription(SubscriptionData(TOPIC, "a >", "SQL92"))
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "The broker does not support consumer to filter message by SQL92"
    # Tags are always served.
    assert service.subscription(SubscriptionData(TOPIC, "A || B")).tags == {"A", "B"}


# --- pulls without their subscription: the heartbeat's ------------------------------------


async def test_a_pull_without_the_flag_filters_with_the_heartbeat_subscription(
    service: MessagingService,
) -> None:
    clients, pulls = handlers(service)
    ch = channel()
    assert clients.heart_beat(ch, heartbeat(subscription())).code == ResponseCode.SUCCESS
    # What the pull's own header says is not used without the flag.
    resp = await pulls.pull_message(ch, pull_request(0, 10, subscription="*"))
    assert bodies(resp) == [b"6", b"7"]


async def test_without_a_heartbeat_the_group_info_does_not_exist(
    service: MessagingService,
) -> None:
    _, pulls = handlers(service)
    exc = await refused(pulls.pull_message(channel(), pull_request(0)))
    assert (exc.code, exc.remark) == (
        ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"
    )  # fmt: skip


async def test_a_topic_the_heartbeat_does_not_name_has_no_subscription(
    service: MessagingService,
) -> None:
    clients, pulls = handlers(service)
    other = {**subscription(), "topic": "Other"}
    clients.heart_beat(channel(), heartbeat(other))
    exc = await refused(pulls.pull_message(channel(), pull_request(0)))
    assert (exc.code, exc.remark) == (
        ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist"
    )  # fmt: skip


async def test_a_pull_newer_than_the_heartbeat_subscription_is_not_latest(
    service: MessagingService,
) -> None:
    clients, pulls = handlers(service)
    clients.heart_beat(channel(), heartbeat(subscription(version=10)))
    exc = await refused(pulls.pull_message(channel(), pull_request(0, sub_version=11)))
    assert (exc.code, exc.remark) == (
        ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
    )  # fmt: skip
    resp = await pulls.pull_message(channel(), pull_request(0, sub_version=10))
    assert resp.code == ResponseCode.SUCCESS


async def test_a_heartbeat_selector_that_does_not_compile_leaves_no_filter_data(
    service: MessagingService,
) -> None:
    clients, pulls = handlers(service)
    assert clients.heart_beat(channel(), heartbeat(subscription("a >"))).code == 0
    exc = await refused(pulls.pull_message(channel(), pull_request(0)))
    assert exc.code == ResponseCode.FILTER_DATA_NOT_EXIST


async def test_a_heartbeat_sql92_subscription_is_refused_when_property_filtering_is_off(
    service: MessagingService,
) -> None:
    clients, pulls = handlers(service)
    clients.heart_beat(channel(), heartbeat(subscription()))
    service.config = BrokerConfig(enable_property_filter=False)
    exc = await refused(pulls.pull_message(channel(), pull_request(0)))
    assert exc.code == ResponseCode.SYSTEM_ERROR


async def test_heartbeats_keep_the_newest_subscription_of_each_topic(
    service: MessagingService,
) -> None:
    clients, _ = handlers(service)
    consumers = service.broker.consumers
    clients.heart_beat(channel(), heartbeat(subscription("a > 1", version=20)))
    # Another member still on an older subscription does not take the group back.
    clients.heart_beat(channel(), heartbeat(subscription("a > 0", version=10)))
    sub = consumers.groups[GROUP].subscriptions[TOPIC]
    assert (sub.data.expression, sub.sub_version) == ("a > 1", 20)
    clients.heart_beat(channel(), heartbeat(subscription("TagA", "TAG", version=30)))
    sub = consumers.groups[GROUP].subscriptions[TOPIC]
    assert (sub.data.expression, sub.tags) == ("TagA", {"TagA"})
    # A topic no longer declared is dropped.
    clients.heart_beat(channel(), heartbeat({**subscription(), "topic": "Other"}))
    assert set(consumers.groups[GROUP].subscriptions) == {"Other"}


@pytest.mark.parametrize(
    "bad",
    [
        "not an object",
        {"subString": "*"},
        {"topic": 5},
        {"topic": TOPIC, "subString": 5},
        {"topic": TOPIC, "expressionType": []},
        {"topic": TOPIC, "subVersion": "ten"},
        {"topic": TOPIC, "subVersion": 2**63},
    ],
)
async def test_a_heartbeat_with_a_malformed_subscription_is_refused_whole(
    service: MessagingService, bad: Any
) -> None:
    clients, _ = handlers(service)
    with pytest.raises(RequestError) as info:
        clients.heart_beat(channel(), heartbeat(subscription(), bad))
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert GROUP not in service.broker.consumers.groups


# --- the group's permissions, checked first -------------------------------------------------


async def test_a_group_that_may_not_consume_gets_no_permission_before_anything_else(
    service: MessagingService,
) -> None:
    service.groups.update(SubscriptionGroupConfig(GROUP, consume_enable=False))
    _, pulls = handlers(service)
    cmd = pull_request(PullSysFlag.SUBSCRIPTION, subscription="a >", expressionType="SQL92")
    cmd.ext_fields["topic"] = "NoSuchTopic"
    exc = await refused(pulls.pull_message(channel(), cmd))
    assert (exc.code, exc.remark) == (
        ResponseCode.NO_PERMISSION, f"subscription group no permission, {GROUP}"
    )  # fmt: skip


async def test_a_broadcasting_group_may_be_forbidden_to_consume_that_way(
    service: MessagingService,
) -> None:
    service.groups.update(SubscriptionGroupConfig(GROUP, consume_broadcast_enable=False))
    clients, pulls = handlers(service)
    clients.heart_beat(channel(), heartbeat(subscription(), model="BROADCASTING"))
    exc = await refused(pulls.pull_message(channel(), pull_request(0)))
    assert exc.code == ResponseCode.NO_PERMISSION
    assert "can not consume by broadcast way" in exc.remark


# --- CHECK_CLIENT_CONFIG ----------------------------------------------------------------------


def check_request(sub: Any) -> RemotingCommand:
    body = {"clientId": "c1", "group": GROUP}
    if sub is not None:
        body["subscriptionData"] = sub
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(body).encode())


@pytest.mark.parametrize(
    "sub",
    [subscription(), subscription("||", "TAG"), subscription("a >", ""), None],
)
async def test_check_client_config_accepts_what_a_pull_would_serve(
    service: MessagingService, sub: Any
) -> None:
    clients, _ = handlers(service)
    resp = clients.check_client_config(channel(), check_request(sub))
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)


async def test_check_client_config_refuses_a_bad_selector_with_the_reason(
    service: MessagingService,
) -> None:
    clients, _ = handlers(service)
    with pytest.raises(RequestError) as info:
        clients.check_client_config(channel(), check_request(subscription("a > 'x'")))
    assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "Value ''x'' cannot be compared." in info.value.remark


async def test_check_client_config_says_when_the_broker_does_not_filter_by_properties(
    service: MessagingService,
) -> None:
    service.config = BrokerConfig(enable_property_filter=False)
    clients, _ = handlers(service)
    with pytest.raises(RequestError) as info:
        clients.check_client_config(channel(), check_request(subscription()))
    assert info.value.code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"subscriptionData": 7}'])
async def test_check_client_config_refuses_a_body_rocketmq_cannot_decode(
    service: MessagingService, body: bytes
) -> None:
    clients, _ = handlers(service)
    cmd = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
    with pytest.raises(RequestError) as info:
        clients.check_client_config(channel(), cmd)
    assert info.value.code == ResponseCode.SYSTEM_ERROR


async def test_a_cpp_client_heartbeat_registers_its_subscriptions(
    service: MessagingService,
) -> None:
    # rocketmq-client-cpp writes enums as ordinals and subVersion as a string.
    body = (
        b'{"clientID":"1-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
        b'"consumeType":1,"groupName":"GID_ORDERS","messageModel":1,"subscriptionDataSet":'
        b'[{"codeSet":[0,0],"subString":"TagA || TagB","subVersion":"1795474156550",'
        b'"tagsSet":["TagA","TagB"],"topic":"Orders"}]}]}\n'
    )
    clients, _ = handlers(service)
    resp = clients.heart_beat(channel(), RemotingCommand.request(RequestCode.HEART_BEAT, {}, body))
    assert resp.code == ResponseCode.SUCCESS
    sub = service.broker.consumers.groups[GROUP].subscriptions[TOPIC]
    assert (sub.sub_version, sub.tags) == (1795474156550, {"TagA", "TagB"})
