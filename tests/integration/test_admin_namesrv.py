"""The NameServer's operations codes and `pocketmq admin` against a NameServer and two brokers
as real processes: write permission wiped and restored (producers follow), the system and unit
topic lists, the NameServer's own config, each unsupported request code logged once, and every
ported admin verb as a table and as --json."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from admin_cli import admin, ok
from client_helpers import FAST_FROM_FIRST
from server_procs import ServerProcess, broker_with_conf, start_each

from pocketmq.client import Producer, message
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKERS = ("broker-a", "broker-b")


class Cluster:
    def __init__(self, workdir: Path) -> None:
        (workdir / "namesrv").mkdir()
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        self.brokers: dict[str, ServerProcess] = {}

        def start(name: str) -> ServerProcess:
            return broker_with_conf(
                workdir / name,
                self.namesrv.addr,
                # haListenPort 0: the default (listen port + 1) may be taken.
                {"brokerClusterName": "DefaultCluster", "brokerName": name, "haListenPort": 0},
            )

        start_each(BROKERS, start, self.brokers, self.stop)
        # Each bound a free port: one picked before the start could be taken meanwhile.
        self.addrs = {name: proc.addr for name, proc in self.brokers.items()}

    def stop(self) -> None:
        for proc in self.brokers.values():
            proc.stop()
        self.namesrv.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the tests that leave it as they found it (each its own topics and
    groups; a permission wiped is restored)."""
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster for one test alone: it changes the NameServer's config and restarts it."""
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def rows(namesrv: str, *args: str) -> Any:
    return json.loads(ok(namesrv, *args, "--json"))


def table(namesrv: str, *args: str) -> list[list[str]]:
    """The verb's table, split into cells (header first)."""
    return [line.split() for line in ok(namesrv, *args).splitlines() if line.strip()]


async def call(
    client: RemotingClient, addr: str, code: int, fields: dict[str, Any] | None = None,
    body: bytes = b"",
) -> RemotingCommand:  # fmt: skip
    return await client.invoke(addr, RemotingCommand.request(code, fields, body), 10)


async def route_perms(client: RemotingClient, ns: str, topic: str) -> dict[str, int]:
    resp = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return {q["brokerName"]: q["perm"] for q in json_body.loads(resp.body)["queueDatas"]}


async def brokers_used(ns: str, topic: str, count: int) -> set[str]:
    async with Producer("PG_PERM", ns) as producer:
        sent = [await producer.send(message(topic, b"m-%d" % i)) for i in range(count)]
    return {r.message_queue.broker_name for r in sent}


def test_write_permission_wiped_and_restored(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr
    created = rows(ns, "update-topic", "-t", "PermT", "-r", "2", "-w", "2")
    assert sorted(r["broker"] for r in created) == sorted(cluster.addrs.values())
    assert {r["result"] for r in created} == {"OK"}

    async def main() -> None:
        client = RemotingClient()
        try:

            async def routed() -> bool:
                resp = await call(
                    client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "PermT"}
                )
                return resp.code == 0 and len(json_body.loads(resp.body)["queueDatas"]) == 2

            await wait_until(routed, 30, "PermT routed on both brokers")
            assert await brokers_used(ns, "PermT", 8) == set(BROKERS)
            # WipeWritePermOfBrokerResponseHeader.wipeTopicCount: every topic broker-a serves.
            resp = await call(client, ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                              {"brokerName": "broker-a"})  # fmt: skip
            assert resp.code == ResponseCode.SUCCESS
            wiped = int(resp.ext_fields["wipeTopicCount"])
            assert wiped >= 2  # PermT and the broker's own topics
            # QueueData.perm: broker-a keeps read (4) only.
            assert await route_perms(client, ns, "PermT") == {"broker-a": 4, "broker-b": 6}
            assert await brokers_used(ns, "PermT", 8) == {"broker-b"}
            # AddWritePermOfBrokerResponseHeader.addTopicCount: the same topics, read-write.
            resp = await call(client, ns, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                              {"brokerName": "broker-a"})  # fmt: skip
            assert (resp.code, int(resp.ext_fields["addTopicCount"])) == (0, wiped)
            assert await route_perms(client, ns, "PermT") == {"broker-a": 6, "broker-b": 6}
            assert await brokers_used(ns, "PermT", 8) == set(BROKERS)
        finally:
            await client.close()

    asyncio.run(main())
    # The same through the verbs, as a table and as --json.
    wiped_rows = rows(ns, "wipe-write-perm", "-b", "broker-b")
    assert [(r["namesrv"], r["broker"]) for r in wiped_rows] == [(ns, "broker-b")]
    assert wiped_rows[0]["topics changed"] >= 2
    route = json.loads(ok(ns, "topic-route", "-t", "PermT", "--json"))
    assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]} == {
        "broker-a": 6, "broker-b": 4,
    }  # fmt: skip
    cells = table(ns, "topic-route", "-t", "PermT")
    perms = {c[0]: c[-1] for c in cells if c[0] in BROKERS}
    assert perms == {"broker-a": "RW-", "broker-b": "R--"}
    added = table(ns, "add-write-perm", "-b", "broker-b")
    assert added[0] == ["namesrv", "broker", "topics", "changed"]
    assert added[1][:2] == [ns, "broker-b"]
    assert rows(ns, "add-write-perm", "-b", "nobody")[0]["topics changed"] == 0


def test_system_and_unit_topic_lists(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr

    def register(topic: str, broker: str, sys_flag: int) -> bytes:
        return json_body.dumps({"queueDatas": [
            {"brokerName": broker, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
             "topicSysFlag": sys_flag},
        ]})  # fmt: skip

    async def main() -> None:
        client = RemotingClient()
        try:
            # TopicList.topicList: cluster and broker names; TopicList.brokerAddr: one broker.
            resp = await call(client, ns, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
            body = json_body.loads(resp.body)
            assert sorted(body["topicList"]) == ["DefaultCluster", *BROKERS]
            assert body["brokerAddr"] in cluster.addrs.values()
            # REGISTER_TOPIC_IN_NAMESRV: TopicRouteData.queueDatas, QueueData.topicSysFlag
            # (TopicSysFlag: 1 unit, 2 has unit subscription).
            for topic, flag in (("UnitT", 1), ("SubT", 2), ("BothT", 3), ("PlainT", 0)):
                resp = await call(client, ns, RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                                  {"topic": topic}, register(topic, "broker-a", flag))  # fmt: skip
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            resp = await call(client, ns, RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                              {"topic": "Lost"}, register("Lost", "broker-x", 0))  # fmt: skip
            assert resp.code == ResponseCode.INVALID_PARAMETER
            assert "not registered" in (resp.remark or "")
            for code, want in (
                (RequestCode.GET_UNIT_TOPIC_LIST, ["BothT", "UnitT"]),
                (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, ["BothT", "SubT"]),
                (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, ["SubT"]),
            ):
                resp = await call(client, ns, code)
                assert sorted(json_body.loads(resp.body)["topicList"]) == want, code
        finally:
            await client.close()

    asyncio.run(main())
    assert [r["topic"] for r in rows(ns, "system-topic-list")] == ["DefaultCluster", *BROKERS]
    assert ok(ns, "system-topic-list").splitlines()[-1].startswith("ask 127.0.0.1:")
    assert [r["topic"] for r in rows(ns, "unit-topic-list")] == ["BothT", "UnitT"]
    assert [r["topic"] for r in rows(ns, "unit-topic-list", "-k", "unit-sub-not-unit")] == ["SubT"]
    assert table(ns, "unit-topic-list", "-k", "unit-sub") == [["topic"], ["BothT"], ["SubT"]]


def test_namesrv_config_get_update_and_persist(own_cluster: Cluster, tmp_path: Path) -> None:
    cluster = own_cluster
    ns = cluster.namesrv.addr
    port = ns.rsplit(":", 1)[1]

    async def main() -> None:
        client = RemotingClient()
        try:
            # The body is properties text (Configuration.getAllConfigsFormatString), under
            # NamesrvConfig's / NettyServerConfig's names.
            resp = await call(client, ns, RequestCode.GET_NAMESRV_CONFIG)
            text = resp.body.decode()
            assert f"listenPort={port}\n" in text
            assert "scanNotActiveBrokerInterval=5000\n" in text
            assert "kvConfigPath=" in text and "configStorePath=" in text
            for body, code, remark in (
                (b"scanNotActiveBrokerInterval=7000\n", ResponseCode.SUCCESS, None),
                (b"kvConfigPath=/tmp/x\n", ResponseCode.NO_PERMISSION,
                 "Can not update config in black list."),
                (b"noSuchSetting=1\n", ResponseCode.INVALID_PARAMETER,
                 "unknown NameServer setting 'noSuchSetting'"),
                (b"listenPort=1\n", ResponseCode.INVALID_PARAMETER, "read only at start"),
                (b"brokerChannelExpiredTime=soon\n", ResponseCode.INVALID_PARAMETER, "soon"),
                (b"brokerChannelExpiredTime=0\n", ResponseCode.INVALID_PARAMETER, "above 0"),
            ):  # fmt: skip
                resp = await call(client, ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
                assert resp.code == code, (body, resp.remark)
                if remark is not None:
                    assert remark in (resp.remark or ""), resp.remark
        finally:
            await client.close()

    asyncio.run(main())
    configs = rows(ns, "get-namesrv-config")
    assert list(configs) == [ns]
    assert configs[ns]["scanNotActiveBrokerInterval"] == "7000"
    assert configs[ns]["brokerChannelExpiredTime"] == "120000"  # refused updates left it
    # Persisted where configStorePath says (the NameServer's HOME is its work directory).
    stored = (tmp_path / "namesrv" / "namesrv" / "namesrv.properties").read_text()
    assert "scanNotActiveBrokerInterval=7000\n" in stored
    done = rows(ns, "update-namesrv-config", "brokerChannelExpiredTime=90000")
    assert done == [{"namesrv": ns, "setting": "brokerChannelExpiredTime", "value": "90000",
                     "result": "OK"}]  # fmt: skip
    assert ["brokerChannelExpiredTime", "90000"] in [c[1:] for c in table(ns, "get-namesrv-config")]
    bad = admin(ns, "update-namesrv-config", "noSuchSetting=1")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "29 (INVALID_PARAMETER)" in bad.stderr and "noSuchSetting" in bad.stderr
    assert admin(ns, "update-namesrv-config", "novalue").returncode == 2
    # A restarted NameServer reads back what was accepted; the rest stays its own.
    assert cluster.namesrv.stop() == 0
    cluster.namesrv = ServerProcess("namesrv", tmp_path / "namesrv")
    again = rows(cluster.namesrv.addr, "get-namesrv-config")[cluster.namesrv.addr]
    assert again["scanNotActiveBrokerInterval"] == "7000"
    assert again["brokerChannelExpiredTime"] == "90000"
    assert again["listenPort"] == str(cluster.namesrv.port)


def test_unsupported_codes_are_logged_once_per_server(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr
    broker = cluster.addrs["broker-a"]

    async def main() -> None:
        client = RemotingClient()
        try:
            for addr in (ns, broker, ns, broker):
                resp = await call(client, addr, 9999)
                assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()

    asyncio.run(main())
    for proc in (cluster.namesrv, cluster.brokers["broker-a"]):
        lines = [
            line for line in proc.log_path.read_text().splitlines()
            if "request code 9999 is not supported" in line
        ]  # fmt: skip
        assert len(lines) == 1, proc.log_path.read_text()
        # Our client's version (MQVersion V4_9_4) and LanguageCode, and its address.
        assert "WARNING" in lines[0] and "from 127.0.0.1:" in lines[0]
        assert "V4_9_4 (401)" in lines[0] and "PYTHON" in lines[0]


def test_every_ported_verb_as_table_and_json(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr
    a, b = cluster.addrs["broker-a"], cluster.addrs["broker-b"]
    ok(ns, "update-topic", "-t", "VerbT", "-r", "1", "-w", "1")
    assert table(ns, "cluster-list") == [
        ["cluster", "broker", "id", "address"],
        ["DefaultCluster", "broker-a", "0", a],
        ["DefaultCluster", "broker-b", "0", b],
    ]
    assert rows(ns, "cluster-list")[1] == {
        "cluster": "DefaultCluster", "broker": "broker-b", "id": 0, "address": b,
    }  # fmt: skip
    status = rows(ns, "broker-status")
    # BrokerRuntimeInfo (KVTable) members: brokerRole, commitLogMaxOffset.
    assert [(r["broker"], r["role"]) for r in status] == [
        ("broker-a", "ASYNC_MASTER"), ("broker-b", "ASYNC_MASTER"),
    ]  # fmt: skip
    assert all(int(r["max offset"]) >= 0 for r in status)
    assert table(ns, "broker-status")[0][:5] == ["cluster", "broker", "id", "address", "role"]

    def routed() -> bool:
        return "VerbT" in [r["topic"] for r in rows(ns, "topic-list")]

    wait_until_cli(routed, "VerbT in the topic list")
    assert ["VerbT"] in table(ns, "topic-list")
    assert rows(ns, "topic-cluster-list", "-t", "VerbT") == [{"cluster": "DefaultCluster"}]
    assert table(ns, "topic-cluster-list", "-t", "VerbT") == [["cluster"], ["DefaultCluster"]]
    assert "VerbT" in [r["topic"] for r in rows(ns, "topic-list", "-c", "DefaultCluster")]
    assert [r["topic"] for r in rows(ns, "topic-list", "-c", "NoCluster")] == []
    # One message on each broker, through send-message's route choice and the topic's queue.
    sent = [rows(ns, "send-message", "-t", "VerbT", "-p", f"body-{i}", "--tags", "T", "-k",
                 f"K{i}")[0] for i in range(6)]  # fmt: skip
    assert {s["offset"] for s in sent} == set(range(6))
    assert all(len(s["msgId"]) == 32 and s["offsetMsgId"] for s in sent)
    got = rows(ns, "consume-message", "-t", "VerbT", "-c", "3")
    assert [(m["offset"], m["body"], m["keys"], m["tags"]) for m in got] == [
        (i, f"body-{i}", f"K{i}", "T") for i in range(3)
    ]
    assert got[0]["msgId"] == sent[0]["msgId"]  # the UNIQ_KEY the message was sent with
    consumed = table(ns, "consume-message", "-t", "VerbT", "-c", "1")
    assert consumed[0] == ["broker", "queue", "offset", "tags", "keys", "msgId", "body"]
    assert consumed[1][-1] == "body-0"
    # The tools group registered only while it read.
    assert admin(ns, "consumer-status", "-g", "TOOLS_CONSUMER").returncode == 1

    # Groups: create, read back (SubscriptionGroupConfig members), progress, live consumers.
    made = rows(ns, "update-subscription-group", "-g", "CG_VERBS", "-r", "5")
    assert sorted((m["broker"], m["retryMaxTimes"]) for m in made) == sorted([(a, 5), (b, 5)])
    assert table(ns, "update-subscription-group", "-g", "CG_VERBS", "-q", "2")[0][:3] == [
        "broker", "group", "retryMaxTimes",
    ]  # fmt: skip
    configs = rows(ns, "subscription-group", "-g", "CG_VERBS")
    assert {addr: (c["retryMaxTimes"], c["retryQueueNums"]) for addr, c in configs.items()} == {
        a: (5, 2), b: (5, 2),
    }  # fmt: skip
    assert len(table(ns, "subscription-group", "-g", "CG_VERBS")) == 3
    progress = rows(ns, "consumer-progress", "-g", "CG_VERBS", "-t", "VerbT")
    # send-message writes to the route's first master: all six on broker-a.
    assert [(p["broker"], p["queue"], p["broker offset"], p["lag"]) for p in progress] == [
        ("broker-a", 0, 6, 6), ("broker-b", 0, 0, 0),
    ]  # fmt: skip
    assert ok(ns, "consumer-progress", "-g", "CG_VERBS", "-t", "VerbT").splitlines()[-1] == (
        "total lag: 6"
    )
    asyncio.run(live_group_verbs(ns))

    deleted = rows(ns, "delete-topic", "-t", "VerbT")
    assert sorted(d["address"] for d in deleted) == sorted([a, b, ns])
    missing = admin(ns, "topic-route", "-t", "VerbT")
    assert missing.returncode == 1 and "17 (TOPIC_NOT_EXIST)" in missing.stderr
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    unknown = admin(ns, "subscription-group", "-g", "NoGroup")
    assert unknown.returncode == 1 and "no master broker has subscription group" in unknown.stderr


def wait_until_cli(check: Any, what: str) -> None:
    asyncio.run(wait_until(lambda: asyncio.to_thread(check), 30, what))


async def live_group_verbs(ns: str) -> None:
    """consumer-status and reset-offset-by-time need the group online."""
    from pocketmq.client import ConsumeResult, PushConsumer

    got: list[bytes] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("CG_VERBS", ns, listener=listener, **FAST_FROM_FIRST)
    consumer.subscribe("VerbT")
    # A message on each broker: a reset needs the group's offset in every queue (RocketMQ's
    # Broker2Client.resetOffset refuses a group with none).
    async with Producer("PG_VERBS", ns) as producer:
        on = {(await producer.send(message("VerbT", b"more-%d" % i))).message_queue.broker_name
              for i in range(2)}  # fmt: skip
    assert on == set(BROKERS)

    async def committed_everywhere() -> bool:
        progress = json.loads(
            await cli(ns, "consumer-progress", "-g", "CG_VERBS", "-t", "VerbT", "--json")
        )
        return sorted((p["broker"], p["consumer offset"]) for p in progress) == [
            ("broker-a", 7), ("broker-b", 1),
        ]  # fmt: skip

    async with consumer:
        await wait_until(lambda: len(got) >= 8, 30, "the eight messages consumed")
        await wait_until(committed_everywhere, 30, "the group's offsets committed on both")
        status = json.loads(await cli(ns, "consumer-status", "-g", "CG_VERBS", "--json"))
        # ConsumerRunningInfo.properties / subscriptionSet.
        assert list(status) == [consumer.client_id]
        info = status[consumer.client_id]
        assert [s["topic"] for s in info["subscriptionSet"] if s["topic"] == "VerbT"] == ["VerbT"]
        lines = (await cli(ns, "consumer-status", "-g", "CG_VERBS")).splitlines()
        assert any(consumer.client_id in line for line in lines)
        reset = json.loads(await cli(ns, "reset-offset-by-time", "-g", "CG_VERBS", "-t", "VerbT",
                                     "-s", "0", "--json"))  # fmt: skip
        assert sum(r["offset"] for r in reset) == 0 and {r["broker"] for r in reset} <= set(BROKERS)
        await wait_until(lambda: len(got) >= 16, 30, "the eight messages consumed again")
        header = (await cli(ns, "reset-offset-by-time", "-g", "CG_VERBS", "-t", "VerbT",
                            "-s", "now")).splitlines()[0]  # fmt: skip
        assert header.split() == ["broker", "queue", "offset"]


async def cli(ns: str, *args: str) -> str:
    out = await asyncio.to_thread(admin, ns, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout
