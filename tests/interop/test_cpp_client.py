"""Interop with the unmodified C++-based ``rocketmq==0.4.4`` client (4.x remoting).

``pocketmq serve`` runs as a real process; the client runs in subprocesses (its native
library starts threads and writes logs under $HOME). Checked: sync, oneway and orderly sends;
a push consumer with a tag expression receives every sent message of its tags and none of the
others; its offsets survive a consumer restart (the second run gets only the new messages);
an orderly consumer (queue locks) gets each sharding key's messages in the order sent; with a
master SIGKILLed, its push consumer reads from the slave and commits its offsets there.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from broker_pair import Pair, table
from cpp_driver import SCRIPT, cpp_client_installed
from server_procs import ServerProcess

from pocketmq.client import (
    LitePullConsumer,
    MessageExt,
    MessageQueue,
    Producer,
    message,
    select_by_hash,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from waiting import wait_until

if not cpp_client_installed():
    pytest.skip("rocketmq==0.4.4 is not installed", allow_module_level=True)

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        yield f"127.0.0.1:{proc.ready['namesrv']}"
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


def run_client(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_produce_and_consume_with_tags_and_restart(tmp_path: Path, serve: str) -> None:
    first = run_client(tmp_path, "produce", serve, "r1")["sent"]
    assert all(s["status"] in ("OK", "ONEWAY") for s in first), first
    wanted = sorted(s["body"] for s in first if s["tag"] in ("TagA", "TagB"))
    got = run_client(tmp_path, "consume", serve, str(len(wanted)))["got"]
    assert sorted(g["body"] for g in got) == wanted
    assert all(g["tag"] in ("TagA", "TagB") for g in got)
    assert all(g["prop"].startswith("v") for g in got)

    second = run_client(tmp_path, "produce", serve, "r2")["sent"]
    wanted2 = sorted(s["body"] for s in second if s["tag"] in ("TagA", "TagB"))
    got2 = run_client(tmp_path, "consume", serve, str(len(wanted2)))["got"]
    # Committed offsets survived the consumer restart: nothing of the first run again.
    assert sorted(g["body"] for g in got2) == wanted2


def test_orderly_send_and_orderly_consumer_keep_per_key_order(tmp_path: Path, serve: str) -> None:
    got = run_client(tmp_path, "orderly", serve, "40")["got"]
    assert sorted(got, key=lambda b: int(b.split(":")[1])) == [f"{i % 4}:{i}" for i in range(40)]
    for key in range(4):
        seq = [int(b.split(":")[1]) for b in got if b.startswith(f"{key}:")]
        assert seq == sorted(seq), f"key {key} consumed out of order: {seq}"


DELAYS_MS = [300, 600, 400, 500] + [1000] * 14


@pytest.fixture
def serve_short_delays(tmp_path: Path) -> Iterator[str]:
    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel=" + " ".join(f"{ms}ms" for ms in DELAYS_MS) + "\n")
    proc = ServerProcess(
        "serve", tmp_path, "-c", str(conf), "--namesrv-port", "0", "--broker-port", "0",
        listen=False,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{proc.ready['namesrv']}"
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


async def _set_retry_max_times(namesrv: str, group: str, times: int) -> None:
    instance = ClientInstance(namesrv, "admin@interop")
    try:
        route = await instance.fetch_route("TBW102")
        assert route is not None
        for name in route.broker_addrs:
            await instance.invoke(
                str(route.master(name)), RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                json_body.dumps({"groupName": group, "retryMaxTimes": times}),
            )  # fmt: skip
    finally:
        await instance.close()


async def _read_dlq(namesrv: str, group: str) -> list[MessageExt]:
    reader = LitePullConsumer("CG_DLQ_READER", namesrv, broker_suspend_ms=1000)
    reader.assign([MessageQueue(f"%DLQ%{group}", "broker-a", 0)])
    polled: list[MessageExt] = []
    async with reader:
        async with asyncio.timeout(20):
            while not polled:
                polled = await reader.poll(1)
    return polled


def test_delay_retry_and_dead_letter_queue(tmp_path: Path, serve_short_delays: str) -> None:
    asyncio.run(_set_retry_max_times(serve_short_delays, "CG_CPP_RETRY", 2))
    result = run_client(tmp_path, "retry", serve_short_delays, "2")
    got = result["got"]
    delayed = [g for g in got if g["body"] == "delayed"]
    poison = [g for g in got if g["body"] == "poison"]
    # The level-1 message never arrives before its delay.
    assert len(delayed) == 1 and delayed[0]["at"] - result["sent_at"] >= DELAYS_MS[0] / 1000
    # Retried at levels 3 and 4 with a growing count, shown under its own topic, then no more.
    assert [p["reconsume"] for p in poison] == [0, 1, 2]
    assert all(p["topic"] == "RetryInterop" for p in poison)
    assert poison[1]["at"] - poison[0]["at"] >= DELAYS_MS[2] / 1000
    assert poison[2]["at"] - poison[1]["at"] >= DELAYS_MS[3] / 1000
    [dead] = asyncio.run(_read_dlq(serve_short_delays, "CG_CPP_RETRY"))
    assert dead.body == b"poison" and dead.properties["RETRY_TOPIC"] == "RetryInterop"


def test_orderly_consumers_keep_key_order_while_a_second_one_joins(
    tmp_path: Path, serve: str
) -> None:
    keys, per_key = 6, 30

    async def produce() -> None:
        async with Producer("PG_ORDER_JOIN", serve) as producer:
            for seq in range(per_key):
                for key in range(keys):
                    await producer.send(
                        message("OrderJoinTopic", f"{key}:{seq}"), selector=select_by_hash,
                        arg=key,
                    )  # fmt: skip
                await asyncio.sleep(0.2)  # the test's schedule: traffic spans the second join

    asyncio.run(_create_topic(serve))

    def start(name: str, seconds: int) -> subprocess.Popen[str]:
        home = tmp_path / name
        home.mkdir()
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), "orderly_consume", serve, str(seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home,
            env={**os.environ, "HOME": str(home)},
        )  # fmt: skip

    first = start("a", 22)
    # The interop clients' schedule: the first consumer rebalances and locks its queues (its
    # state is inside the C++ client, out of sight) before the second one joins.
    time.sleep(3)
    second = start("b", 19)
    asyncio.run(produce())  # about 6 s, while both run
    arrivals: list[tuple[float, str]] = []
    for proc in (first, second):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        got = json.loads(out.strip().splitlines()[-1])["got"]
        mine = [(at, body) for body, at in got if body != "create"]
        assert mine, "each consumer took part"
        arrivals += mine
    arrivals.sort()
    bodies = {b for _, b in arrivals}
    assert bodies == {f"{k}:{s}" for k in range(keys) for s in range(per_key)}
    # Each key in order, and never ahead of itself. A queue handed over may replay from its last
    # committed offset, as with RocketMQ's broker: this client persists a dropped queue's offset
    # and unlocks it without waiting for the message its listener is consuming
    # (RebalancePush::removeUnnecessaryMessageQueue), so the next owner may take that message and
    # those after it again: a replay goes back, then on one by one.
    for key in range(keys):
        seqs = [int(b.split(":")[1]) for _, b in arrivals if b.startswith(f"{key}:")]
        assert seqs[0] == 0 and all(b == a + 1 or b <= a for a, b in itertools.pairwise(seqs)), (
            key, seqs,
        )  # fmt: skip


async def _create_topic(namesrv: str) -> None:
    async with Producer("PG_ORDER_JOIN", namesrv) as producer:
        await producer.send(message("OrderJoinTopic", "create"))


HA_TOPIC = "InteropTopic"  # what cpp_client_script.py consumes, with "TagA || TagB"


async def _routed_to(namesrv: str, want: dict[int, str]) -> None:
    admin = ClientInstance(namesrv, "admin@interop")

    async def routed() -> bool:
        route = await admin.fetch_route(HA_TOPIC)
        return route is not None and route.broker_addrs.get("broker-a") == want

    try:
        await wait_until(routed, 20, f"the route of {HA_TOPIC} to list {want}")
    finally:
        await admin.close()


async def _send(namesrv: str, bodies: list[str]) -> None:
    async with Producer("PG_HA", namesrv) as producer:
        for body in bodies:
            await producer.send(message(HA_TOPIC, body, tags="TagA"))


async def _committed(addr: str, namesrv: str) -> int:
    admin = ClientInstance(namesrv, "admin@interop")
    try:
        offsets = await table(admin, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    finally:
        await admin.close()
    return sum(offsets["offsetTable"].get(f"{HA_TOPIC}@CG_INTEROP", {}).values())


def test_the_cpp_consumer_reads_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    pair = Pair(tmp_path / "pair")
    try:
        bodies = [f"ha-{i}" for i in range(16)]
        asyncio.run(_send(pair.namesrv.addr, bodies))
        # The slave starts on a copy of the master's store (replication is store/ha's).
        assert pair.procs["master"].stop() == 0
        shutil.copytree(pair.home("master") / "store", pair.home("slave") / "store")
        pair.start("master")
        pair.start("slave")
        master, slave = pair.addr("master"), pair.addr("slave")
        asyncio.run(_routed_to(pair.namesrv.addr, {0: master, 1: slave}))
        pair.procs["master"].proc.kill()
        pair.procs["master"].proc.wait()
        asyncio.run(_routed_to(pair.namesrv.addr, {1: slave}))
        got = run_client(tmp_path, "consume", pair.namesrv.addr, str(len(bodies)))["got"]
        assert sorted(g["body"] for g in got) == sorted(bodies)
        # The consumer persists its offsets every 5 s and on shutdown: on the slave.
        assert asyncio.run(_committed(slave, pair.namesrv.addr)) == len(bodies)
    finally:
        pair.stop()
