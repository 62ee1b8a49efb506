"""The broker admin codes mqadmin sends and the `pocketmq admin` verbs over them, against a
NameServer and two brokers (separate processes) with a running producer and push consumer of
our client. Each asserted field names the RocketMQ class it comes from."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import admin_cli
import pytest
from client_helpers import FAST_FROM_FIRST, Collector
from server_procs import ServerProcess, start_each

from pocketmq.client import Producer, PushConsumer, SendResult, SendStatus, message
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.protocol.remoting import CURRENT_VERSION
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "T_ADMIN"
GROUP = "CG_ADMIN"
PRODUCER_GROUP = "PG_ADMIN"
SENT = 12


class TwoBrokers:
    """A NameServer and brokers a and b, each started with its own broker.conf (kept across
    restarts: UPDATE_BROKER_CONFIG writes into it)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        (workdir / "namesrv").mkdir()
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        # 0 until started: each broker binds a free port, kept for its restarts (a port picked
        # before the start could be taken meanwhile by another test's server).
        self.ports = dict.fromkeys(("broker-a", "broker-b"), 0)
        for name in self.ports:
            home = workdir / name
            home.mkdir()
            # haListenPort 0: the default (listen port + 1) may be the other broker's port.
            self.conf(name).write_text(
                f"brokerClusterName=AdminCluster\nbrokerName={name}\nhaListenPort=0\n"
            )
        self.brokers: dict[str, ServerProcess] = {}
        start_each(self.ports, self.start, self.brokers, self.stop)

    def conf(self, name: str) -> Path:
        return self.workdir / name / "broker.conf"

    def start(self, name: str) -> ServerProcess:
        home = self.workdir / name
        proc = ServerProcess(
            "broker", home, "-c", str(self.conf(name)), "--store", str(home / "store"),
            "--listen", f"127.0.0.1:{self.ports[name]}", "-n", self.namesrv.addr, listen=False,
        )  # fmt: skip
        self.ports[name] = proc.port
        return proc

    def restart(self, name: str) -> None:
        assert self.brokers[name].stop() == 0
        self.brokers[name] = self.start(name)

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def stop(self) -> None:
        for proc in self.brokers.values():
            proc.stop()
        self.namesrv.stop()


async def admin(ns: str, *args: str, code: int = 0) -> str:
    """One `pocketmq admin` run (off the event loop, so that the clients of
    the test keep heartbeating); its stdout, or its stderr when it is expected to fail."""
    out = await asyncio.to_thread(admin_cli.admin, ns, *args)
    assert out.returncode == code, out.stderr or out.stdout
    assert "Traceback" not in out.stderr
    return out.stdout if code == 0 else out.stderr


async def admin_json(ns: str, *args: str) -> Any:
    return json.loads(await admin(ns, *args, "--json"))


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[TwoBrokers]:
    c = await asyncio.to_thread(TwoBrokers, tmp_path)
    try:
        yield c
    finally:
        await asyncio.to_thread(c.stop)


async def invoke(inst: ClientInstance, addr: str, code: int, fields: dict[str, Any],
                 body: bytes = b"", ok: tuple[int, ...] = (0,)) -> Any:  # fmt: skip
    return await inst.invoke(addr, code, fields, body, ok=ok)


async def create_topic(inst: ClientInstance, cluster: TwoBrokers) -> None:
    for name in cluster.ports:
        fields = {"topic": TOPIC, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
        await invoke(inst, cluster.addr(name), RequestCode.UPDATE_AND_CREATE_TOPIC, fields)

    async def routed() -> bool:
        route = await inst.fetch_route(TOPIC)
        return route is not None and len(route.write_queues) == 4

    await wait_until(routed, 20, f"the route of {TOPIC} on both brokers")


async def committed(inst: ClientInstance, cluster: TwoBrokers, group: str) -> int:
    total = 0
    for name in cluster.ports:
        for queue_id in range(2):
            resp = await invoke(
                inst, cluster.addr(name), RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": group, "topic": TOPIC, "queueId": queue_id},
                ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
            )  # fmt: skip
            if resp.code == ResponseCode.SUCCESS:
                total += int(resp.ext_fields["offset"])
    return total


async def test_admin_codes_and_verbs_show_the_tests_traffic(cluster: TwoBrokers) -> None:
    ns = cluster.namesrv.addr
    a, b = cluster.addr("broker-a"), cluster.addr("broker-b")
    inst = ClientInstance(ns, "admin@test")
    collector = Collector()
    consumer = PushConsumer(GROUP, ns, listener=collector, **FAST_FROM_FIRST)
    consumer.subscribe(TOPIC, "TagA || TagB")
    try:
        await create_topic(inst, cluster)
        async with Producer(PRODUCER_GROUP, ns) as producer, consumer:
            results = []
            for i in range(SENT):
                sent = await producer.send(message(TOPIC, b"m%d" % i, tags="TagA", keys=f"K{i}"))
                assert sent.status == SendStatus.SEND_OK
                results.append(sent)
            await collector.wait_for(SENT)
            # The producer's periodic heartbeat (30 s), now that it knows both brokers.
            await producer.instance.send_heartbeat()
            await wait_until(lambda: _eq(committed(inst, cluster, GROUP), SENT), 20,
                             "the consumer's offsets committed")  # fmt: skip
            await check_codes(inst, cluster, producer.instance.client_id,
                              consumer.instance.client_id)  # fmt: skip
            await check_verbs(ns, cluster, producer.instance.client_id,
                              consumer.instance.client_id)  # fmt: skip
            await check_query_msg(ns, results[3])
            await check_send_rt(ns)
            await check_cluster_rt(ns)
        await check_config(inst, cluster, a, b)
    finally:
        await inst.close()


async def _eq(value: Any, want: int) -> bool:
    return bool(await value == want)


async def check_codes(
    inst: ClientInstance, cluster: TwoBrokers, producer_id: str, consumer_id: str
) -> None:
    a = cluster.addr("broker-a")
    # GET_TOPIC_STATS_INFO: TopicStatsTable.offsetTable, MessageQueue -> TopicOffset.
    max_total = 0
    for name in cluster.ports:
        resp = await invoke(inst, cluster.addr(name), RequestCode.GET_TOPIC_STATS_INFO,
                            {"topic": TOPIC})  # fmt: skip
        table = json_body.loads(resp.body)["offsetTable"]
        assert len(table) == 2
        for key, offset in table.items():
            assert json_body.parse_message_queue_key(key)[:2] == (TOPIC, name)
            assert offset["minOffset"] == 0
            assert (offset["lastUpdateTimestamp"] > 0) == (offset["maxOffset"] > 0)
            max_total += offset["maxOffset"]
    assert max_total == SENT
    missing = await invoke(inst, a, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"},
                           ok=(ResponseCode.TOPIC_NOT_EXIST,))  # fmt: skip
    assert missing.remark == "topic[NoSuchTopic] not exist"

    # GET_CONSUMER_CONNECTION_LIST: ConsumerConnection (connectionSet of Connection,
    # subscriptionTable of SubscriptionData, consumeType, messageModel, consumeFromWhere).
    resp = await invoke(inst, a, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
    cc = json_body.loads(resp.body)
    [conn] = cc["connectionSet"]
    assert conn["clientId"] == consumer_id and conn["clientAddr"].startswith("127.0.0.1:")
    assert conn["language"] == LanguageCode.PYTHON.name and conn["version"] == CURRENT_VERSION
    sub = cc["subscriptionTable"][TOPIC]
    assert sub["subString"] == "TagA || TagB" and sub["tagsSet"] == ["TagA", "TagB"]
    assert cc["consumeType"] == "CONSUME_PASSIVELY" and cc["messageModel"] == "CLUSTERING"
    assert cc["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    offline = await invoke(inst, a, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                           {"consumerGroup": "CG_NOBODY"},
                           ok=(ResponseCode.CONSUMER_NOT_ONLINE,))  # fmt: skip
    assert offline.remark == "the consumer group[CG_NOBODY] not online"

    # GET_PRODUCER_CONNECTION_LIST: ProducerConnection.connectionSet.
    resp = await invoke(inst, a, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                        {"producerGroup": PRODUCER_GROUP})  # fmt: skip
    [pconn] = json_body.loads(resp.body)["connectionSet"]
    assert pconn["clientId"] == producer_id and pconn["language"] == "PYTHON"
    none = await invoke(inst, a, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                        {"producerGroup": "PG_NOBODY"},
                        ok=(ResponseCode.SYSTEM_ERROR,))  # fmt: skip
    assert none.remark == "the producer group[PG_NOBODY] not exist"

    # QUERY_TOPIC_CONSUME_BY_WHO: GroupList.groupList.
    resp = await invoke(inst, a, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert GROUP in json_body.loads(resp.body)["groupList"]

    # CLONE_GROUP_OFFSET (CloneGroupOffsetRequestHeader): the copy equals the source.
    for name in cluster.ports:
        await invoke(inst, cluster.addr(name), RequestCode.CLONE_GROUP_OFFSET,
                     {"srcGroup": GROUP, "destGroup": "CG_CLONE_RAW", "topic": TOPIC,
                      "offline": False})  # fmt: skip
    assert await committed(inst, cluster, "CG_CLONE_RAW") == SENT


async def check_verbs(ns: str, cluster: TwoBrokers, producer_id: str, consumer_id: str) -> None:
    status = await admin_json(ns, "topic-status", "-t", TOPIC)
    assert len(status) == 4 and sum(q["maxOffset"] for q in status) == SENT
    assert {q["broker"] for q in status} == set(cluster.ports)
    table = await admin(ns, "topic-status", "-t", TOPIC)
    assert f"messages held: {SENT}" in table and "broker-a" in table

    assert await admin_json(ns, "topic-cluster-list", "-t", TOPIC) == [{"cluster": "AdminCluster"}]

    cc = await admin_json(ns, "consumer-connection", "-g", GROUP)
    assert [c["clientId"] for c in cc["connections"]] == [consumer_id]
    assert cc["consumeType"] == "CONSUME_PASSIVELY" and TOPIC in cc["subscriptions"]
    assert consumer_id in await admin(ns, "consumer-connection", "-g", GROUP)
    err = await admin(ns, "consumer-connection", "-g", "CG_NOBODY", code=1)
    assert "not online" in err

    pc = await admin_json(ns, "producer-connection", "-g", PRODUCER_GROUP, "-t", TOPIC)
    assert [(p["clientId"], p["language"]) for p in pc] == [(producer_id, "PYTHON")]

    assert {"group": GROUP} in await admin_json(ns, "topic-consumed-by", "-t", TOPIC)

    cloned = await admin_json(ns, "clone-group-offset", "-s", GROUP, "-d", "CG_CLONE_CLI",
                              "-t", TOPIC)  # fmt: skip
    assert {r["broker"] for r in cloned} == set(cluster.ports)
    progress = await admin(ns, "consumer-progress", "-g", "CG_CLONE_CLI", "-t", TOPIC)
    assert "total lag: 0" in progress


async def check_config(inst: ClientInstance, cluster: TwoBrokers, a: str, b: str) -> None:
    # GET_BROKER_CONFIG: a properties body and GetBrokerConfigResponseHeader.version.
    resp = await invoke(inst, a, RequestCode.GET_BROKER_CONFIG, {})
    props = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
    assert props["brokerName"] == "broker-a" and props["brokerClusterName"] == "AdminCluster"
    assert props["traceOn"] == "true" and props["brokerIP1"] == "127.0.0.1"
    assert json.loads(resp.ext_fields["version"])["counter"] == 0

    # UPDATE_BROKER_CONFIG: a runtime key applies at once and bumps the data version.
    ns = cluster.namesrv.addr
    out = await admin_json(ns, "update-broker-config", "-b", a, "-k", "traceOn", "-v", "false")
    assert out == [{"broker": a, "result": "applied"}]
    rows = await admin_json(ns, "get-broker-config", "-b", a)
    assert {"broker": a, "key": "traceOn", "value": "false"} in rows
    resp = await invoke(inst, a, RequestCode.GET_BROKER_CONFIG, {})
    assert json.loads(resp.ext_fields["version"])["counter"] == 1

    # brokerPermission applies at once: broker-a re-registers its topics read-only (4), as
    # registerBrokerAll does, and refuses sends.
    await admin(ns, "update-broker-config", "-b", a, "-k", "brokerPermission", "-v", "4")

    async def route_perm() -> int | None:
        resp = await invoke(inst, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        queues = json_body.loads(resp.body)["queueDatas"]
        return next((q["perm"] for q in queues if q["brokerName"] == "broker-a"), None)

    await wait_until(lambda: _eq(route_perm(), 4), 20, "broker-a's route read-only")
    err = await admin(ns, "check-msg-send-rt", "-t", TOPIC, "-a", "4", "--json")
    assert '"ok": 0' in err and "code 16" in err  # NO_PERMISSION on broker-a's queues
    rows = {r["broker"]: r for r in await admin_json(ns, "cluster-rt", "-a", "2")}
    assert (rows["broker-a"]["successCount"], rows["broker-a"]["failCount"]) == (0, 2)
    assert "code 16" in rows["broker-a"]["error"]
    assert (rows["broker-b"]["successCount"], rows["broker-b"]["failCount"]) == (2, 0)
    await admin(ns, "update-broker-config", "-b", a, "-k", "brokerPermission", "-v", "6")
    await wait_until(lambda: _eq(route_perm(), 6), 20, "broker-a's route writable again")

    # A bad key or value is refused with the reason, and nothing changes.
    err = await admin(ns, "update-broker-config", "-b", a, "-k", "noSuchKey", "-v", "1", code=1)
    assert f"code {ResponseCode.INVALID_PARAMETER}" in err and "noSuchKey" in err
    err = await admin(ns, "update-broker-config", "-b", a, "-k", "traceOn", "-v", "yes", code=1)
    assert "true or false" in err
    resp = await invoke(inst, a, RequestCode.UPDATE_BROKER_CONFIG, {},
                        b"brokerConfigPath=/tmp/x\n", ok=(ResponseCode.NO_PERMISSION,))  # fmt: skip
    assert resp.remark == "Can not update config in black list."

    # A restart-only key is kept in broker.conf and in effect after a restart.
    out = await admin_json(ns, "update-broker-config", "-b", b, "-k", "maxMessageSize",
                           "-v", "65536")  # fmt: skip
    assert "after a restart: maxMessageSize" in out[0]["result"]
    assert "maxMessageSize=65536" in cluster.conf("broker-b").read_text()
    await asyncio.to_thread(cluster.restart, "broker-b")
    rows = await admin_json(ns, "get-broker-config", "-b", b)
    assert {"broker": b, "key": "maxMessageSize", "value": "65536"} in rows
    assert {"broker": b, "key": "brokerName", "value": "broker-b"} in rows


async def check_query_msg(ns: str, sent: SendResult) -> None:
    """Each query verb finds the message and its track (MessageTrack: the online group
    CONSUMED it, the cloned groups, which never came online, are NOT_ONLINE)."""
    want = {GROUP: "CONSUMED", "CG_CLONE_RAW": "NOT_ONLINE", "CG_CLONE_CLI": "NOT_ONLINE"}
    mq = sent.message_queue
    for args in (
        ("query-msg-by-id", "-i", sent.offset_msg_id),
        ("query-msg-by-unique-key", "-t", TOPIC, "-i", sent.msg_id),
        ("query-msg-by-key", "-t", TOPIC, "-k", "K3"),
        ("query-msg-by-offset", "-t", TOPIC, "-b", mq.broker_name, "-i", str(mq.queue_id),
         "-o", str(sent.queue_offset)),
    ):  # fmt: skip
        [msg] = await admin_json(ns, *args)
        assert (msg["msgId"], msg["offsetMsgId"], msg["body"]) == (
            sent.msg_id,
            sent.offset_msg_id,
            "m3",
        ), args
        assert msg["keys"] == "K3" and msg["tags"] == "TagA" and msg["queueId"] == mq.queue_id
        assert {t["group"]: t["trackType"] for t in msg["tracks"]} == want, args
    table = await admin(ns, "query-msg-by-id", "-i", sent.offset_msg_id)
    assert sent.msg_id in table and "CONSUMED" in table
    err = await admin(ns, "query-msg-by-key", "-t", TOPIC, "-k", "NoSuchKey", code=1)
    assert "no message of T_ADMIN has the key NoSuchKey" in err


async def check_send_rt(ns: str) -> None:
    """check-msg-send-rt sends to every write queue in turn; topic-status counts the sends."""
    rows = await admin_json(ns, "check-msg-send-rt", "-t", TOPIC, "-a", "8", "-s", "64")
    assert [(r["sent"], r["ok"], r["error"]) for r in rows] == [(2, 2, "")] * 4
    assert all(r["maxRtMs"] >= r["avgRtMs"] > 0 for r in rows)
    status = await admin_json(ns, "topic-status", "-t", TOPIC)
    assert sum(q["maxOffset"] for q in status) == SENT + 8


async def check_cluster_rt(ns: str) -> None:
    """cluster-rt (mqadmin's clusterRT) sends to each broker's own topic, named after the
    broker (TopicConfigManager creates it at start, one queue): the sends land there."""
    rows = await admin_json(ns, "cluster-rt", "-a", "5", "-s", "32")
    assert [(r["cluster"], r["broker"], r["successCount"], r["failCount"], r["error"])
            for r in rows] == [("AdminCluster", name, 5, 0, "")
                               for name in ("broker-a", "broker-b")]  # fmt: skip
    assert all(r["rtMs"] > 0 for r in rows)
    for name in ("broker-a", "broker-b"):
        [queue] = await admin_json(ns, "topic-status", "-t", name)
        assert (queue["broker"], queue["maxOffset"]) == (name, 5)
    # -p prints clusterRT's tlog lines, one per broker and round.
    lines = (await admin(ns, "cluster-rt", "-c", "AdminCluster", "-a", "2", "-p",
                         "-m", "room1", "-r", "2", "-i", "0")).splitlines()  # fmt: skip
    assert [line.split("|")[1:4] for line in lines] == [
        ["room1", "AdminCluster", "broker-a"],
        ["room1", "AdminCluster", "broker-b"],
    ] * 2
    assert all(line.split("|")[4].isdigit() for line in lines)
    err = await admin(ns, "cluster-rt", "-c", "NoSuchCluster", code=1)
    assert "cluster NoSuchCluster does not exist (known clusters: AdminCluster)" in err
