"""RouteTable: registration, routes, expiry and removal, with an explicit clock."""

from __future__ import annotations

from typing import Any

from pocketmq.namesrv.route_table import RouteTable

TOPICS: dict[str, dict[str, Any]] = {
    "T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
    "U": {"topicName": "U", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4},
}


def register(
    table: RouteTable,
    name: str,
    addr: str,
    broker_id: int = 0,
    now: int = 0,
    topics: dict[str, dict[str, Any]] | None = None,
    version: int = 1,
) -> Any:
    return table.register_broker(
        cluster="C",
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        topic_configs=TOPICS if topics is None else topics,
        data_version={"timestamp": 1, "counter": version},
        filter_servers=[],
        now_ms=now,
    )


def test_route_lists_queues_and_brokers_of_a_topic() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911")
    register(table, "broker-a", "10.0.0.2:10911", broker_id=1)
    register(table, "broker-b", "10.0.0.3:10911", topics={"T": TOPICS["T"]})
    route = table.pickup_route("T")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert route["queueDatas"][0] == {
        "brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicSysFlag": 0, "topicSynFlag": 0,
    }  # fmt: skip
    assert route["brokerDatas"][0] == {
        "cluster": "C",
        "brokerName": "broker-a",
        "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"},
    }
    assert table.pickup_route("missing") is None
    assert table.cluster_info()["clusterAddrTable"] == {"C": ["broker-a", "broker-b"]}
    assert table.topics_of_cluster("C") == ["T", "U"]


def test_slave_learns_its_master() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911")
    result = register(table, "broker-a", "10.0.0.2:10911", broker_id=1)
    assert result.master_addr == "10.0.0.1:10911"
    assert result.ha_server_addr == "10.0.0.1:10912"


def test_slave_registrations_do_not_change_topics() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", topics={"T": TOPICS["T"]})
    register(table, "broker-a", "10.0.0.2:10911", broker_id=1, topics=TOPICS)
    assert table.topics() == ["T"]


def test_silent_brokers_expire_and_take_their_queues() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", now=0)
    register(table, "broker-b", "10.0.0.3:10911", now=100_000)
    assert table.scan_not_active(now_ms=120_000) == []
    assert table.scan_not_active(now_ms=120_001) == ["10.0.0.1:10911"]
    route = table.pickup_route("T")
    assert route is not None
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]
    assert table.scan_not_active(now_ms=220_001) == ["10.0.0.3:10911"]
    assert table.pickup_route("T") is None
    assert table.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_reregistration_keeps_a_broker_alive() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", now=0)
    register(table, "broker-a", "10.0.0.1:10911", now=100_000)
    assert table.scan_not_active(now_ms=200_000) == []


def test_unregister_and_connection_close() -> None:
    table = RouteTable()
    conn = object()
    table.register_broker(
        cluster="C", broker_addr="a:1", broker_name="a", broker_id=0, ha_server_addr="",
        topic_configs=TOPICS, data_version={}, filter_servers=[], now_ms=0, conn_id=conn,
    )  # fmt: skip
    register(table, "b", "b:1")
    assert table.on_connection_closed(conn) == ["a:1"]
    route = table.pickup_route("T")
    assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["b"]
    table.unregister_broker(cluster="C", broker_addr="b:1", broker_name="b", broker_id=0)
    assert table.pickup_route("T") is None


def test_delete_topic() -> None:
    table = RouteTable()
    register(table, "a", "a:1")
    assert table.delete_topic("T")
    assert table.topics() == ["U"]
    assert not table.delete_topic("T")
