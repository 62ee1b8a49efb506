"""The admin library's pure parts and request sequences, against a scripted RemotingClient:
consume-message registers the tools group before it pulls and unregisters it after, refusals
name RocketMQ's codes, config text and routes parse, a slave's lag is read from its master."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.admin import AdminClient, AdminError
from pocketmq.admin.cluster import BrokerRow, lag_of, parse_config_text
from pocketmq.admin.messages import TOOLS_CONSUMER_GROUP, consume_messages
from pocketmq.admin.topics import route_rows
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import encode_record
from pocketmq.protocol.remoting import RemotingCommand

ROUTE = {
    "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2,
                    "perm": 6, "topicSysFlag": 0}],
    "brokerDatas": [{"cluster": "C", "brokerName": "broker-a",
                     "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}}],
}  # fmt: skip


class ScriptedRemoting:
    """Answers each request with answer(addr, cmd) and records (addr, code, cmd)."""

    def __init__(self, answer: Callable[[str, RemotingCommand], RemotingCommand]) -> None:
        self.answer = answer
        self.calls: list[tuple[str, int, RemotingCommand]] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.calls.append((addr, cmd.code, cmd))
        return self.answer(addr, cmd)

    async def close(self) -> None:
        pass


def client(answer: Callable[[str, RemotingCommand], RemotingCommand]) -> AdminClient:
    return AdminClient("ns:9876", remoting=ScriptedRemoting(answer))  # type: ignore[arg-type]


def calls(c: AdminClient) -> list[tuple[str, int, RemotingCommand]]:
    remoting = c.remoting
    assert isinstance(remoting, ScriptedRemoting)
    return remoting.calls


def record(queue_id: int, offset: int, body: bytes) -> bytes:
    msg = MessageExt(topic="T", body=body, queue_id=queue_id, queue_offset=offset)
    msg.properties["TAGS"] = "A"
    return bytes(encode_record(msg))


async def test_consume_message_heartbeats_the_tools_group_before_pulling() -> None:
    def answer(addr: str, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(ROUTE))
        if cmd.code == RequestCode.PULL_MESSAGE:
            qid = int(cmd.ext_fields["queueId"])
            if qid == 1:
                return cmd.response(ResponseCode.PULL_NOT_FOUND)
            return cmd.response(ResponseCode.SUCCESS, body=record(0, 0, b"x") + record(0, 1, b"y"))
        return cmd.response(ResponseCode.SUCCESS)

    c = client(answer)
    got = await consume_messages(c, "T", 10, "A || B")
    assert [(name, m.queue_offset, m.body) for name, m in got] == [
        ("broker-a", 0, b"x"), ("broker-a", 1, b"y"),
    ]  # fmt: skip
    codes = [(addr, code) for addr, code, _ in calls(c)]
    assert codes == [
        ("ns:9876", RequestCode.GET_ROUTEINFO_BY_TOPIC),
        ("10.0.0.1:10911", RequestCode.HEART_BEAT),
        ("10.0.0.1:10911", RequestCode.PULL_MESSAGE),
        ("10.0.0.1:10911", RequestCode.PULL_MESSAGE),
        ("10.0.0.1:10911", RequestCode.UNREGISTER_CLIENT),
    ]
    heartbeat = json_body.loads(calls(c)[1][2].body)
    (consumer,) = heartbeat["consumerDataSet"]
    # HeartbeatData / ConsumerData / SubscriptionData members, as a pull consumer sends them.
    assert consumer["groupName"] == TOOLS_CONSUMER_GROUP
    assert consumer["consumeType"] == "CONSUME_ACTIVELY"
    (sub,) = consumer["subscriptionDataSet"]
    assert (sub["topic"], sub["subString"], sub["tagsSet"]) == ("T", "A || B", ["A", "B"])
    pull = calls(c)[2][2].ext_fields
    assert pull["consumerGroup"] == TOOLS_CONSUMER_GROUP and pull["subscription"] == "A || B"
    unregister = calls(c)[-1][2].ext_fields
    assert unregister["clientID"] == heartbeat["clientID"]


async def test_a_refused_pull_still_unregisters_and_names_the_code() -> None:
    def answer(addr: str, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(ROUTE))
        if cmd.code == RequestCode.PULL_MESSAGE:
            return cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "no subscription")
        return cmd.response(ResponseCode.SUCCESS)

    c = client(answer)
    with pytest.raises(AdminError) as info:
        await consume_messages(c, "T", 10)
    assert str(info.value) == (
        "10.0.0.1:10911 refused request PULL_MESSAGE (11) with code 24 "
        "(SUBSCRIPTION_NOT_EXIST): no subscription"
    )
    assert info.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert calls(c)[-1][1] == RequestCode.UNREGISTER_CLIENT
    with pytest.raises(AdminError, match="bad tag expression"):
        await consume_messages(c, "T", 1, "||")


async def test_an_unknown_topic_says_how_to_create_it() -> None:
    c = client(lambda addr, cmd: cmd.response(ResponseCode.TOPIC_NOT_EXIST, "No topic route"))
    with pytest.raises(AdminError, match=r"topic Nope does not exist.*update-topic.*17 "):
        await c.route("Nope")


def test_config_text_and_route_rows_parse() -> None:
    text = b"listenPort=9876\n# comment\n\nkvConfigPath=/a=b\n"
    assert parse_config_text(text) == {"listenPort": "9876", "kvConfigPath": "/a=b"}
    assert route_rows(ROUTE) == [
        ("broker-a", "0", "10.0.0.1:10911", 2, 2, 6),
        ("broker-a", "1", "10.0.0.2:10911", 2, 2, 6),
    ]
    with pytest.raises(AdminError, match="bad route"):
        route_rows(
            {"queueDatas": [{"brokerName": "broker-a"}], "brokerDatas": ROUTE["brokerDatas"]}
        )


def test_a_slaves_lag_comes_from_its_masters_runtime_info() -> None:
    info: dict[str, Any] = {"commitLogMaxOffset": "1000", "haSlaveLagBytes_1.2.3.4:5": "40",
                            "haSlaveLagSeconds_1.2.3.4:5": "2"}  # fmt: skip
    master = BrokerRow("C", "b", 0, "m:1", info)
    connected = BrokerRow("C", "b", 1, "s:1", {"haClientAddress": "1.2.3.4:5",
                                                "commitLogMaxOffset": "960"})  # fmt: skip
    apart = BrokerRow("C", "b", 2, "s:2", {"commitLogMaxOffset": "900"})
    assert lag_of(master, master) == ("-", "-")
    assert lag_of(connected, master) == ("40", "2")
    assert lag_of(apart, master) == ("100", "-")
    assert lag_of(apart, None) == ("-", "-")
