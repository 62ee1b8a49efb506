"""Where our consumers read and commit when a brokerName has slaves, as the Java client
decides (MQClientInstance.findBrokerAddressInSubscribe, PullAPIWrapper,
RemoteBrokerOffsetStore): the suggested broker, else the master, else a slave; offsets on
the master, else (the route fetched again) on a slave. Sends stay with masters."""

from __future__ import annotations

from typing import Any

import pytest

from pocketmq.client.instance import ClientInstance
from pocketmq.client.offset_store import RemoteOffsetStore
from pocketmq.client.pull import PullStatus, Subscription, pull
from pocketmq.client.route import FoundBroker, MessageQueue, TopicRoute, find_broker_in_subscribe
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand

BOTH = {0: "m:1", 1: "s:1"}
SLAVE_ONLY = {1: "s:1"}
TWO_SLAVES = {0: "m:1", 2: "s:2", 3: "s:3"}


@pytest.mark.parametrize(
    ("addrs", "broker_id", "only_this", "expected"),
    [
        (BOTH, 0, True, FoundBroker("m:1", False)),
        (BOTH, 1, True, FoundBroker("s:1", True)),
        # The master is gone: only when any broker will do, the slave.
        (SLAVE_ONLY, 0, True, None),
        (SLAVE_ONLY, 0, False, FoundBroker("s:1", True)),
        # A suggested slave that is missing: the next id, else the lowest id.
        (TWO_SLAVES, 1, True, FoundBroker("s:2", True)),
        (TWO_SLAVES, 4, True, None),
        (TWO_SLAVES, 4, False, FoundBroker("m:1", False)),
        ({}, 0, False, None),
    ],
)
def test_find_broker_in_subscribe(
    addrs: dict[int, str], broker_id: int, only_this: bool, expected: FoundBroker | None
) -> None:
    assert find_broker_in_subscribe(addrs, broker_id, only_this) == expected


def test_a_route_without_its_master_is_read_from_the_slave_and_not_written() -> None:
    data = {
        "brokerDatas": [{"brokerName": "b", "brokerAddrs": {"1": "s:1"}}],
        "queueDatas": [{"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}],
    }
    route = TopicRoute.from_json("T", data)
    assert route.broker_addrs == {"b": {1: "s:1"}}
    assert route.write_queues == []
    assert len(route.read_queues) == 2
    assert route.master("b") is None
    assert route.any_broker("b") == "s:1"


class FakeInstance(ClientInstance):
    """A client instance whose requests are answered by ``answer`` and whose route fetches
    return ``next_route``."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:9876", "cid")
        self.sent: list[tuple[str, int, dict[str, Any]]] = []
        self.next_route: dict[str, dict[int, str]] = {}
        self.route_fetches = 0
        self.answer_fields: dict[str, Any] = {}

    async def invoke(  # type: ignore[override]
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
        **kwargs: Any,
    ) -> RemotingCommand:  # fmt: skip
        self.sent.append((addr, code, dict(fields or {})))
        cmd = RemotingCommand.request(code, fields)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=self.answer_fields)

    async def update_route(self, topic: str) -> TopicRoute | None:
        self.route_fetches += 1
        self.broker_addrs = dict(self.next_route)
        return None


async def test_offsets_go_to_the_master_else_to_a_slave_after_a_route_refresh() -> None:
    instance = FakeInstance()
    instance.broker_addrs = {"b": dict(BOTH)}
    store = RemoteOffsetStore(instance, "G")
    mq = MessageQueue("T", "b", 0)
    store.update(mq, 7, increase_only=False)
    await store.persist_all([mq])
    assert instance.sent[-1][:2] == ("m:1", RequestCode.UPDATE_CONSUMER_OFFSET)
    assert instance.route_fetches == 0
    # The master left the route: the route is fetched again, then the slave takes it.
    instance.broker_addrs = {"b": dict(SLAVE_ONLY)}
    instance.next_route = {"b": dict(SLAVE_ONLY)}
    await store.persist_all([mq])
    addr, code, fields = instance.sent[-1]
    assert (addr, code, fields["commitOffset"]) == ("s:1", RequestCode.UPDATE_CONSUMER_OFFSET, 7)
    assert instance.route_fetches == 1
    instance.answer_fields = {"offset": 7}
    assert await store.read_from_store(mq) == 7
    assert instance.sent[-1][:2] == ("s:1", RequestCode.QUERY_CONSUMER_OFFSET)


async def test_a_pull_answer_carries_the_suggested_broker() -> None:
    instance = FakeInstance()
    instance.answer_fields = {"suggestWhichBrokerId": 1, "nextBeginOffset": 3, "minOffset": 0,
                              "maxOffset": 3}  # fmt: skip
    result = await pull(instance, "s:1", "G", MessageQueue("T", "b", 0), Subscription.parse(
        "T", "*"), 3, 32)  # fmt: skip
    assert result.suggest_which_broker_id == 1
    assert result.status is PullStatus.FOUND
