"""A NameServer and two brokers of one cluster as separate processes, driven by our client:
both brokers take traffic, and a broker killed with SIGKILL is avoided by the producer (retries,
and the latency fault tolerance when enabled) while every send that returned OK is consumed once
the broker is back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import FAST
from server_procs import ServerProcess, start_each

from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    MessageExt,
    Producer,
    PushConsumer,
    SendResult,
    SendStatus,
    message,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol.codes import RequestCode
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        # 0 until started: each broker binds a free port (one picked before the start could be
        # taken meanwhile by another test's server).
        self.ports = dict.fromkeys(("broker-a", "broker-b"), 0)
        self.brokers: dict[str, ServerProcess] = {}
        start_each(self.ports, self.start_broker, self.brokers, self.stop)

    def start_broker(self, name: str) -> ServerProcess:
        home = self.workdir / name
        home.mkdir(exist_ok=True)
        conf = home / "broker.conf"
        # haListenPort 0: the default (listen port + 1) may be the other broker's port.
        conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName={name}\nhaListenPort=0\n")
        proc = ServerProcess(
            "broker", home, "-c", str(conf), "--store", str(home / "store"),
            "--listen", f"127.0.0.1:{self.ports[name]}", "-n", self.namesrv.addr, listen=False,
        )  # fmt: skip
        self.ports[name] = proc.port
        return proc

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def stop(self) -> None:
        for proc in self.brokers.values():
            proc.stop()
        self.namesrv.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "namesrv").mkdir()
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


async def create_topic(cluster: Cluster, topic: str) -> None:
    admin = ClientInstance(cluster.namesrv.addr, "admin@test")
    try:
        for name in cluster.ports:
            await admin.invoke(
                cluster.addr(name), RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
            )  # fmt: skip

        async def routed() -> bool:
            route = await admin.fetch_route(topic)
            return route is not None and len(route.write_queues) == 8

        await wait_until(routed, 20, f"the route of {topic} with eight write queues")
    finally:
        await admin.close()


async def consume_all(namesrv: str, topic: str, want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        got.update(m.body for m in msgs)
        if want <= got:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "CG_CLUSTER", namesrv, listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    async with consumer:
        async with asyncio.timeout(30):
            await done.wait()
    return got


async def test_both_brokers_of_a_cluster_take_traffic(cluster: Cluster) -> None:
    topic = "T_TWO_BROKERS"
    await create_topic(cluster, topic)
    async with Producer("PG_CLUSTER", cluster.namesrv.addr) as producer:
        results = [await producer.send(message(topic, b"m-%d" % i)) for i in range(40)]
    per_broker = {r.message_queue.broker_name for r in results}
    assert per_broker == {"broker-a", "broker-b"}
    want = {b"m-%d" % i for i in range(40)}
    assert await consume_all(cluster.namesrv.addr, topic, want) == want


@pytest.mark.parametrize("fault_tolerance", [False, True], ids=["retry-only", "latency-fault"])
async def test_a_killed_broker_is_avoided_and_nothing_acknowledged_is_lost(
    cluster: Cluster, fault_tolerance: bool
) -> None:
    topic = "T_KILLED"
    await create_topic(cluster, topic)
    ok: list[SendResult] = []
    async with Producer(
        "PG_KILL", cluster.namesrv.addr, send_latency_fault_enable=fault_tolerance
    ) as producer:
        for i in range(30):
            ok.append(await producer.send(message(topic, b"before-%d" % i)))
        cluster.brokers["broker-a"].proc.kill()
        cluster.brokers["broker-a"].stop()
        after = [await producer.send(message(topic, b"after-%d" % i)) for i in range(30)]
        if fault_tolerance:  # isolated after its first failure, for ten minutes
            assert not producer.selector.fault.is_available("broker-a")
    # Every send after the kill succeeded, on the broker still alive.
    assert all(r.status is SendStatus.SEND_OK for r in ok + after)
    assert {r.message_queue.broker_name for r in after} == {"broker-b"}
    assert {r.message_queue.broker_name for r in ok} == {"broker-a", "broker-b"}

    cluster.brokers["broker-a"] = cluster.start_broker("broker-a")
    want = {b"before-%d" % i for i in range(30)} | {b"after-%d" % i for i in range(30)}
    assert await consume_all(cluster.namesrv.addr, topic, want) >= want
