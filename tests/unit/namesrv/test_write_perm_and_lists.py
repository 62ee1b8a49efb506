"""RouteTable's operations rules: write permission wiped and given back per broker name,
topics registered by request, deleted per cluster, and the system and unit topic lists."""

from __future__ import annotations

from typing import Any

import pytest

from pocketmq.errors import RequestError
from pocketmq.namesrv.route_table import (
    QueueData,
    RouteTable,
    has_unit_sub,
    has_unit_sub_not_unit,
    is_unit_topic,
)
from pocketmq.protocol.codes import ResponseCode


def topic(name: str, perm: int = 6, sys_flag: int = 0) -> dict[str, Any]:
    return {"topicName": name, "readQueueNums": 2, "writeQueueNums": 2, "perm": perm,
            "topicSysFlag": sys_flag}  # fmt: skip


def table() -> RouteTable:
    t = RouteTable()
    for name, cluster, topics in (
        ("broker-a", "C1", {"T": topic("T"), "RO": topic("RO", perm=4), "U": topic("U", 6, 1)}),
        ("broker-b", "C1", {"T": topic("T"), "S": topic("S", 6, 2), "US": topic("US", 6, 3)}),
        ("broker-c", "C2", {"T": topic("T")}),
    ):
        t.register_broker(
            cluster=cluster, broker_addr=f"{name}:10911", broker_name=name, broker_id=0,
            ha_server_addr="", topic_configs=topics, data_version={"counter": 1},
            filter_servers=[], now_ms=0,
        )  # fmt: skip
    return t


def perms(t: RouteTable, name: str) -> dict[str, int]:
    route = t.pickup_route(name)
    assert route is not None
    return {q["brokerName"]: q["perm"] for q in route["queueDatas"]}


def test_wipe_takes_write_from_one_broker_name_and_add_gives_read_write_back() -> None:
    t = table()
    assert t.wipe_write_perm("broker-a") == 3
    assert perms(t, "T") == {"broker-a": 4, "broker-b": 6, "broker-c": 6}
    assert perms(t, "RO") == {"broker-a": 4}
    assert t.wipe_write_perm("broker-a") == 3  # counted again, as RocketMQ counts
    # ADD sets read and write whatever the topic had: a read-only topic becomes writable.
    assert t.add_write_perm("broker-a") == 3
    assert perms(t, "T")["broker-a"] == 6 and perms(t, "RO") == {"broker-a": 6}
    assert t.wipe_write_perm("nobody") == 0 and t.add_write_perm("nobody") == 0


def test_a_wipe_lasts_until_the_broker_registers_changed_topics() -> None:
    t = table()
    t.wipe_write_perm("broker-c")
    again = dict(
        cluster="C2",
        broker_addr="broker-c:10911",
        broker_name="broker-c",
        broker_id=0,
        ha_server_addr="",
        topic_configs={"T": topic("T")},
        filter_servers=[],
        now_ms=1,
    )
    t.register_broker(**again, data_version={"counter": 1})  # type: ignore[arg-type]
    assert perms(t, "T")["broker-c"] == 4
    t.register_broker(**again, data_version={"counter": 2})  # type: ignore[arg-type]
    assert perms(t, "T")["broker-c"] == 6


def test_delete_topic_of_one_cluster_keeps_the_other_clusters_queues() -> None:
    t = table()
    assert t.delete_topic("T", "C1")
    assert perms(t, "T") == {"broker-c": 6}
    assert not t.delete_topic("T", "C1") and not t.delete_topic("T", "NoCluster")
    assert t.delete_topic("T", "C2") and t.pickup_route("T") is None
    assert t.delete_topic("S") and not t.delete_topic("S")


def test_register_topic_needs_registered_brokers() -> None:
    t = table()
    assert t.register_topic("New", [QueueData("broker-a", 1, 1, 6), QueueData("broker-b", 2, 2, 4)])
    assert perms(t, "New") == {"broker-a": 6, "broker-b": 4}
    assert not t.register_topic("Lost", [QueueData("broker-a", 1, 1, 6), QueueData("x", 1, 1, 6)])
    assert t.pickup_route("Lost") is None
    assert not t.register_topic("Empty", [])


def test_system_topics_are_the_cluster_and_broker_names() -> None:
    t = table()
    body = t.system_topics()
    assert body["topicList"] == ["C1", "C2", "broker-a", "broker-b", "broker-c"]
    assert body["brokerAddr"] in {"broker-a:10911", "broker-b:10911", "broker-c:10911"}
    assert RouteTable().system_topics() == {"topicList": []}  # no brokerAddr member at all


def test_unit_topic_lists_by_topic_sys_flag() -> None:
    t = table()
    assert t.topics_by_sys_flag(is_unit_topic) == ["U", "US"]
    assert t.topics_by_sys_flag(has_unit_sub) == ["S", "US"]
    assert t.topics_by_sys_flag(has_unit_sub_not_unit) == ["S"]


def test_queue_data_from_route_json_is_checked() -> None:
    q = QueueData.from_json({"brokerName": "b", "readQueueNums": "2", "writeQueueNums": 1,
                             "perm": 6})  # fmt: skip
    assert q == QueueData("b", 2, 1, 6, 0)
    with pytest.raises(RequestError) as info:
        QueueData.from_json({"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1,
                             "perm": 9})  # fmt: skip
    assert info.value.code == ResponseCode.NO_PERMISSION
    with pytest.raises(KeyError):
        QueueData.from_json({"brokerName": "b"})
