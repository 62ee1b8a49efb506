"""Broker statistics against a live NameServer and two brokers: known traffic (remoting and
gRPC sends to one topic on both brokers, remoting pulls by one group) and then every place
that reports it: VIEW_BROKER_STATS_DATA (315), GET_BROKER_CONSUME_STATS (317),
GET_CONSUME_STATS' consumeTps, GET_BROKER_RUNTIME_INFO's counters, the Prometheus endpoint
(parsed with prometheus_client's parser) and `pocketmq admin stats-all` /
`broker-consume-stats` (in this process, through the CLI's own command group).

The minute window of RocketMQ's statistics is made of 10 s snapshots, so the checks wait
(with wait_until) for the brokers' next snapshot after the traffic.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import admin_cli
import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_procs import ServerProcess, broker_with_conf

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "StatsTopic"
GROUP = "StatsConsumers"
CLUSTER = "StatsCluster"
# Sends: to broker-a over remoting (queue 0 and queue 1) and over gRPC; to broker-b over
# remoting. GROUP pulls everything broker-a has and nothing from broker-b.
A_REMOTING = (3, 4)
A_GRPC = 5
B_REMOTING = 6
A_TOTAL = sum(A_REMOTING) + A_GRPC
# Delay messages sent to broker-a at the end, for the message_type label.
DELAYED = 2


@dataclass
class Cluster:
    namesrv: str
    a: ServerProcess
    b: ServerProcess


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "namesrv").mkdir()
    namesrv = ServerProcess("namesrv", tmp_path / "namesrv")
    procs = [namesrv]
    try:
        brokers = []
        for name in ("broker-a", "broker-b"):
            conf: dict[str, str | int] = {
                "brokerClusterName": CLUSTER, "brokerName": name, "metricsExporterType": "PROM",
                "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": 0,
            }  # fmt: skip
            brokers.append(broker_with_conf(tmp_path / name, namesrv.addr, conf))
            procs.append(brokers[-1])
        yield Cluster(namesrv.addr, *brokers)
    finally:
        for proc in reversed(procs):
            assert proc.stop() == 0, proc.log_path.read_text()


@pytest.fixture
async def remoting() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    yield client
    await client.close()


async def call(client: RemotingClient, addr: str, code: int, fields: dict[str, Any],
               ok: int = ResponseCode.SUCCESS) -> RemotingCommand:  # fmt: skip
    resp = await client.invoke(addr, RemotingCommand.request(code, fields), 10)
    assert resp.code == ok, resp.remark
    return resp


async def send(client: RemotingClient, addr: str, queue_id: int, count: int, **props: str) -> None:
    for i in range(count):
        fields = {"producerGroup": "PG", "topic": TOPIC, "defaultTopic": "TBW102",
                  "defaultTopicQueueNums": 2, "queueId": queue_id, "sysFlag": 0,
                  "bornTimestamp": int(time.time() * 1000), "flag": 0,
                  "properties": encode_properties({"UNIQ_KEY": uuid.uuid4().hex, **props}),
                  "reconsumeTimes": 0}  # fmt: skip
        resp = await client.invoke(
            addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"m%d" % i), 10
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def send_grpc(endpoint: str, count: int) -> None:
    meta = (("x-mq-client-id", "stats-test@1@0@abc"), ("x-mq-request-id", str(uuid.uuid4())))
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        for _ in range(count):
            msg = pb.Message(
                topic=pb.Resource(name=TOPIC), body=b"g",
                system_properties=pb.SystemProperties(
                    message_id=uuid.uuid4().hex.upper(), message_type=pb.NORMAL
                ),
            )  # fmt: skip
            resp = await stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=meta,
                                          timeout=10)  # fmt: skip
            assert resp.status.code == pb.OK, resp.status.message


async def max_offset(client: RemotingClient, addr: str, queue_id: int) -> int:
    resp = await call(client, addr, RequestCode.GET_MAX_OFFSET,
                      {"topic": TOPIC, "queueId": queue_id})  # fmt: skip
    return int(resp.ext_fields["offset"])


async def pull_all(client: RemotingClient, addr: str, queue_id: int, count: int) -> None:
    """GROUP pulls ``count`` messages of the queue from offset 0 and commits past them."""
    resp = await call(
        client, addr, RequestCode.PULL_MESSAGE,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id, "queueOffset": 0,
         "maxMsgNums": 64, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
         "subscription": "*", "subVersion": 0},
    )  # fmt: skip
    assert resp.body.count(b"m") + resp.body.count(b"g") >= count  # the bodies came back
    await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
               {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id,
                "commitOffset": count})  # fmt: skip


async def stats_data(
    client: RemotingClient, addr: str, name: str, key: str
) -> dict[str, dict[str, float]]:
    """A BrokerStatsData (statsMinute/statsHour/statsDay of BrokerStatsItem sum/tps/avgpt)."""
    resp = await call(client, addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": name, "statsKey": key})  # fmt: skip
    data: dict[str, dict[str, float]] = json.loads(resp.body)
    return data


async def json_call(client: RemotingClient, addr: str, code: int, fields: dict[str, Any]) -> Any:
    return json_body.loads((await call(client, addr, code, fields)).body)


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def admin(namesrv: str, *args: str) -> str:
    done = admin_cli.admin(namesrv, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def traffic(cluster: Cluster, client: RemotingClient) -> None:
    for proc in (cluster.a, cluster.b):
        fields = {"topic": TOPIC, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
        await call(client, proc.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    for queue_id, count in enumerate(A_REMOTING):
        await send(client, cluster.a.addr, queue_id, count)
    await send_grpc(f"127.0.0.1:{cluster.a.ready['grpc']}", A_GRPC)
    await send(client, cluster.b.addr, 0, B_REMOTING)

    async def dispatched() -> bool:
        on_a = [await max_offset(client, cluster.a.addr, q) for q in (0, 1)]
        return sum(on_a) == A_TOTAL and await max_offset(client, cluster.b.addr, 0) == B_REMOTING

    await wait_until(dispatched, 10, "every message in its consume queue")
    for queue_id in (0, 1):
        await pull_all(client, cluster.a.addr, queue_id,
                       await max_offset(client, cluster.a.addr, queue_id))  # fmt: skip


async def test_statistics_agree_with_the_traffic(
    cluster: Cluster, remoting: RemotingClient
) -> None:
    await traffic(cluster, remoting)
    a, b = cluster.a.addr, cluster.b.addr

    # --- VIEW_BROKER_STATS_DATA, once the brokers' next 10 s snapshot has the traffic.
    async def minute_sum(addr: str, name: str, key: str) -> float:
        return (await stats_data(remoting, addr, name, key))["statsMinute"]["sum"]

    async def sampled() -> bool:
        return (await minute_sum(a, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}") == A_TOTAL
                and await minute_sum(b, "TOPIC_PUT_NUMS", TOPIC) == B_REMOTING)  # fmt: skip

    await wait_until(sampled, 30, "a statistics snapshot of the traffic")
    put = await stats_data(remoting, a, "TOPIC_PUT_NUMS", TOPIC)
    assert put["statsMinute"]["sum"] == A_TOTAL
    assert put["statsMinute"]["tps"] > 0
    assert set(put) == {"statsMinute", "statsHour", "statsDay"}
    assert set(put["statsHour"]) == {"sum", "tps", "avgpt"}  # BrokerStatsItem's fields
    size = await stats_data(remoting, a, "TOPIC_PUT_SIZE", TOPIC)
    assert size["statsMinute"]["sum"] > A_TOTAL  # whole records, bytes
    assert (await stats_data(remoting, a, "BROKER_PUT_NUMS", CLUSTER))["statsMinute"]["sum"] == (
        A_TOTAL
    )
    assert (await stats_data(remoting, a, "BROKER_GET_NUMS", CLUSTER))["statsMinute"]["sum"] == (
        A_TOTAL
    )
    missing = await call(remoting, b, RequestCode.VIEW_BROKER_STATS_DATA,
                         {"statsName": "GROUP_GET_NUMS", "statsKey": f"{TOPIC}@{GROUP}"},
                         ok=ResponseCode.SYSTEM_ERROR)  # fmt: skip
    assert missing.remark == f"The stats <GROUP_GET_NUMS> <{TOPIC}@{GROUP}> not exist"

    # --- GET_CONSUME_STATS (ConsumeStats.consumeTps) and GET_BROKER_CONSUME_STATS
    # (ConsumeStatsList: brokerAddr, consumeStatsList [{group: [ConsumeStats]}], totalDiff).
    stats = await json_call(remoting, a, RequestCode.GET_CONSUME_STATS,
                            {"consumerGroup": GROUP, "topic": TOPIC})  # fmt: skip
    assert stats["consumeTps"] > 0
    listed = await json_call(remoting, a, RequestCode.GET_BROKER_CONSUME_STATS,
                             {"isOrder": "false"})  # fmt: skip
    assert listed["brokerAddr"] == a
    assert listed["totalDiff"] == 0
    ours = [s for entry in listed["consumeStatsList"] for s in entry.get(GROUP, [])]
    assert len(ours) == 1 and ours[0]["consumeTps"] > 0
    queues = {json_body.parse_message_queue_key(k): v for k, v in ours[0]["offsetTable"].items()}
    assert sorted(queues) == [(TOPIC, "broker-a", 0), (TOPIC, "broker-a", 1)]
    assert sum(w["consumerOffset"] for w in queues.values()) == A_TOTAL
    assert all(w["lastTimestamp"] > 0 for w in queues.values())
    only_ordered = await json_call(remoting, a, RequestCode.GET_BROKER_CONSUME_STATS,
                                   {"isOrder": "true"})  # fmt: skip
    assert all(entry == {name: []} for entry in only_ordered["consumeStatsList"]
               for name in entry)  # fmt: skip
    no_header = await call(remoting, a, RequestCode.GET_BROKER_CONSUME_STATS, {},
                           ok=ResponseCode.SYSTEM_ERROR)  # fmt: skip
    assert "isOrder" in (no_header.remark or "")

    # --- GET_BROKER_RUNTIME_INFO: BrokerStats' totals and StoreStatsService's TPS strings.
    info = (await json_call(remoting, a, RequestCode.GET_BROKER_RUNTIME_INFO, {}))["table"]
    assert info["msgPutTotalTodayNow"] == str(A_TOTAL)
    assert info["msgGetTotalTodayNow"] == str(A_TOTAL)
    assert info["msgPutTotalTodayMorning"] == "0"
    assert len(info["putTps"].split(" ")) == 3
    assert all(float(x) >= 0 for x in info["getTransferedTps"].split(" "))
    assert info["brokerVersionDesc"].startswith("V4_9_")
    assert int(info["bootTimestamp"]) <= int(time.time() * 1000)
    assert int(info["earliestMessageTimeStamp"]) > 0
    assert int(info["commitLogMaxOffset"]) > 0  # the existing keys stay
    b_info = (await json_call(remoting, b, RequestCode.GET_BROKER_RUNTIME_INFO, {}))["table"]
    assert (b_info["msgPutTotalTodayNow"], b_info["msgGetTotalTodayNow"]) == (str(B_REMOTING), "0")

    # --- /metrics, counted by the same statistics.
    metrics = await asyncio.to_thread(scrape, cluster.a.ready["metrics"])
    common = {("cluster", CLUSTER), ("node_type", "broker"), ("node_id", "broker-a")}

    def value(name: str, **labels: str) -> float:
        """The sum of the series with these labels (whatever their other labels)."""
        want = {*labels.items(), *common}
        found = [v for (n, have), v in metrics.items() if n == name and want <= have]
        assert found, (name, labels)
        return sum(found)

    assert value("rocketmq_messages_in_total", topic=TOPIC, protocol_type="remoting") == (
        sum(A_REMOTING)
    )
    assert value("rocketmq_messages_in_total", topic=TOPIC, protocol_type="grpc") == A_GRPC
    assert value("rocketmq_throughput_in_total", topic=TOPIC, protocol_type="remoting") > 0
    assert value("rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP,
                 protocol_type="remoting") == A_TOTAL  # fmt: skip
    assert value("rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP,
                 protocol_type="remoting") == size["statsMinute"]["sum"]  # fmt: skip
    assert value("rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 0
    assert value("rocketmq_storage_size") > 0
    assert value("rocketmq_storage_dispatch_behind_bytes") == 0
    sends = value("rocketmq_rpc_latency_count", protocol_type="remoting",
                  request_code=str(int(RequestCode.SEND_MESSAGE)), response_code="0")  # fmt: skip
    assert sends == sum(A_REMOTING)
    grpc_sends = value("rocketmq_rpc_latency_count", protocol_type="grpc",
                       request_code="SendMessage", response_code=str(pb.OK))  # fmt: skip
    assert grpc_sends == A_GRPC
    b_metrics = await asyncio.to_thread(scrape, cluster.b.ready["metrics"])
    b_common = {("cluster", CLUSTER), ("node_type", "broker"), ("node_id", "broker-b")}
    lag_key = frozenset({("topic", TOPIC), ("consumer_group", GROUP), *b_common})
    assert ("rocketmq_consumer_lag_messages", lag_key) not in b_metrics  # no offsets there

    # --- the admin verbs.
    rows = json.loads(admin(cluster.namesrv, "stats-all", "-t", TOPIC, "--json"))
    assert rows == [{
        "topic": TOPIC, "consumer group": GROUP, "accumulation": B_REMOTING,
        "in tps": rows[0]["in tps"], "out tps": rows[0]["out tps"],
        "in msg 24h": A_TOTAL + B_REMOTING, "out msg 24h": A_TOTAL,
    }]  # fmt: skip
    assert rows[0]["in tps"] > 0 and rows[0]["out tps"] > 0
    table = admin(cluster.namesrv, "stats-all", "-t", TOPIC)
    assert TOPIC in table and GROUP in table
    consume = json.loads(admin(cluster.namesrv, "broker-consume-stats", "-b", a, "--json"))
    assert sorted((r["topic"], r["group"], r["queue"]) for r in consume) == [
        (TOPIC, GROUP, 0),
        (TOPIC, GROUP, 1),
    ]
    assert sum(r["consumer offset"] for r in consume) == A_TOTAL
    table = admin(cluster.namesrv, "broker-consume-stats", "-b", a)
    assert GROUP in table and "Diff Total: 0" in table

    # --- RocketMQ 5's labels (BrokerMetricsManager): message_type and is_system on messages
    # in, is_system and is_retry on messages out; then delay messages (DELAY level 1).
    plain = {"topic": TOPIC, "is_system": "false"}
    assert value("rocketmq_messages_in_total", message_type="normal", protocol_type="remoting",
                 **plain) == sum(A_REMOTING)  # fmt: skip
    assert value("rocketmq_messages_in_total", message_type="normal", protocol_type="grpc",
                 **plain) == A_GRPC  # fmt: skip
    assert value("rocketmq_messages_out_total", consumer_group=GROUP, is_retry="false",
                 protocol_type="remoting", **plain) == A_TOTAL  # fmt: skip
    await send(remoting, a, 0, DELAYED, DELAY="1")
    metrics = await asyncio.to_thread(scrape, cluster.a.ready["metrics"])
    assert value("rocketmq_messages_in_total", message_type="delay", **plain) == DELAYED
    assert value("rocketmq_messages_in_total", message_type="normal", **plain) == A_TOTAL
    assert value("rocketmq_throughput_in_total", message_type="delay", **plain) > 0
