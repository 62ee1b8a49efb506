"""Master/slave replication between real broker processes (a NameServer, a master and its
slave of the same brokerName), driven by our client: byte identity of the CommitLogs, a slave
restarted or wiped, and what SYNC_MASTER answers with its slave up, killed or stalled."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import test_broker as raw
from server_procs import BrokerPair, commitlog_equal, commitlog_is_prefix, commitlog_segments

from pocketmq.client import Producer, SendResult, SendStatus, message
from pocketmq.clock import SYSTEM_CLOCK
from pocketmq.errors import PocketMQError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import decode_offset_msg_id
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from pocketmq.store import MessageStore, StoreConfig
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Small segments so that several roll; short timeouts so that the waits stay short.
SMALL: dict[str, str | int] = {
    "mappedFileSizeCommitLog": 256 * 1024,
    "maxMessageSize": 65536,
    "haSendHeartbeatInterval": 1000,
    "syncFlushTimeout": 1500,
}
TOPICS = ("HA_A", "HA_B", "HA_C")


@pytest.fixture
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerPair]:
    master_conf = getattr(request, "param", {})
    p = BrokerPair(tmp_path, SMALL, master_conf=master_conf)
    try:
        yield p
    finally:
        p.stop()


async def create_topics(pair: BrokerPair) -> None:
    client = RemotingClient()
    try:
        for broker in (pair.master, pair.slave):
            assert broker is not None
            for topic in TOPICS:
                req = RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {"topic": topic, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                )
                assert (await client.invoke(broker.addr, req, 5)).code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def load(pair: BrokerPair, count: int, tag: str) -> list[SendResult]:
    """``count`` messages over TOPICS in batches; every batch must be acknowledged."""
    results = []
    async with Producer("PG_HA", pair.namesrv.addr) as producer:
        for start in range(0, count, 50):
            topic = TOPICS[(start // 50) % len(TOPICS)]
            batch = [
                message(topic, b"%s-%d-" % (tag.encode(), i) + bytes(200))
                for i in range(start, min(start + 50, count))
            ]
            result = await producer.send_batch(batch)
            assert result.status is SendStatus.SEND_OK, result
            results.append(result)
    return results


async def pull_all(addr: str, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    client = RemotingClient()
    got: list[tuple[int, bytes]] = []
    offset = 0
    try:
        while True:
            resp = await client.invoke(addr, raw.pull_request(topic, queue_id, offset), 5)
            if resp.code != ResponseCode.SUCCESS:
                return got
            got += [(qo, body) for qo, body, _ in raw.records(resp.body)]
            offset = int(resp.ext_fields["nextBeginOffset"])
    finally:
        await client.close()


def verify_store(pair: BrokerPair, role: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "store", "inspect", "--verify",
         str(pair.store(role)), "-c", str(pair.workdir / role / "broker.conf")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


async def caught_up(pair: BrokerPair, timeout_s: float = 60) -> None:
    slave, master = pair.store("slave"), pair.store("master")
    await wait_until(lambda: commitlog_equal(slave, master), timeout_s, "the slave's catch-up")


async def test_the_slave_commitlog_is_the_masters_byte_for_byte(pair: BrokerPair) -> None:
    await create_topics(pair)
    await load(pair, 3000, "a")
    await caught_up(pair)
    assert len(commitlog_segments(pair.store("master"))) >= 3
    assert pair.slave is not None
    for topic in TOPICS:
        for queue_id in (0, 1):
            on_master = await pull_all(pair.master.addr, topic, queue_id)
            assert on_master
            assert await pull_all(pair.slave.addr, topic, queue_id) == on_master
    assert pair.stop() == [0, 0]
    assert commitlog_equal(pair.store("slave"), pair.store("master"))
    verify_store(pair, "master")
    verify_store(pair, "slave")


async def test_a_killed_slave_resumes_from_its_offset(pair: BrokerPair) -> None:
    await create_topics(pair)
    await load(pair, 600, "a")
    await caught_up(pair)
    assert pair.slave is not None
    pair.slave.proc.kill()
    pair.slave.stop()
    await load(pair, 2000, "b")
    pair.start_slave()
    await caught_up(pair)
    # It went on from its own log: a slave that started over would begin at a later segment.
    assert commitlog_segments(pair.store("slave"))[0].name == "0" * 20
    assert pair.stop() == [0, 0]
    verify_store(pair, "slave")


async def test_a_wiped_slave_catches_up_from_the_masters_last_segment(pair: BrokerPair) -> None:
    await create_topics(pair)
    await load(pair, 300, "a")
    assert pair.slave is not None
    pair.slave.stop()
    shutil.rmtree(pair.store("slave"))
    await load(pair, 2000, "b")
    last = commitlog_segments(pair.store("master"))[-1].name
    assert last != "0" * 20
    pair.start_slave()
    await caught_up(pair)
    assert commitlog_segments(pair.store("slave"))[0].name == last
    await load(pair, 100, "c")
    await caught_up(pair)


async def send_one(producer: Producer, body: bytes) -> SendStatus:
    return (await producer.send(message("HA_SYNC", body))).status


def answered(producer: Producer, status: SendStatus) -> Callable[[], Awaitable[bool]]:
    """A wait_until predicate: a probe send gets ``status``."""

    async def probe() -> bool:
        return await send_one(producer, b"probe") is status

    return probe


@pytest.mark.parametrize("pair", [{"brokerRole": "SYNC_MASTER"}], indirect=True)
async def test_sync_master_answers_by_its_slave(pair: BrokerPair) -> None:
    async with Producer("PG_SYNC", pair.namesrv.addr) as producer:
        # Until the slave has connected, sends are stored but answered SLAVE_NOT_AVAILABLE.
        await wait_until(answered(producer, SendStatus.SEND_OK), 30, "an in-sync slave")
        assert [await send_one(producer, b"up-%d" % i) for i in range(20)] == [
            SendStatus.SEND_OK
        ] * 20
        assert pair.slave is not None
        pair.slave.proc.kill()
        pair.slave.stop()
        await wait_until(
            answered(producer, SendStatus.SLAVE_NOT_AVAILABLE), 20, "SLAVE_NOT_AVAILABLE"
        )
        assert [await send_one(producer, b"down-%d" % i) for i in range(5)] == [
            SendStatus.SLAVE_NOT_AVAILABLE
        ] * 5
        slave = pair.start_slave()
        await wait_until(answered(producer, SendStatus.SEND_OK), 30, "the slave back")
        slave.proc.send_signal(signal.SIGSTOP)  # connected, but acknowledges nothing
        try:
            assert await send_one(producer, b"stalled") == SendStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            slave.proc.send_signal(signal.SIGCONT)
        await caught_up(pair)


@pytest.mark.parametrize(
    "pair", [{"brokerRole": "SYNC_MASTER", "flushDiskType": "SYNC_FLUSH"}], indirect=True
)
async def test_every_acknowledged_message_is_on_the_slave_when_the_master_dies(
    pair: BrokerPair,
) -> None:
    acked: list[tuple[int, bytes]] = []

    async def produce(producer: Producer, worker: int) -> None:
        for i in range(100_000):
            body = b"w%d-%d" % (worker, i)
            with contextlib.suppress(PocketMQError, OSError, TimeoutError):
                result = await producer.send(message("HA_DURABLE", body))
                if result.status is SendStatus.SEND_OK:
                    acked.append((decode_offset_msg_id(result.offset_msg_id)[1], body))

    async with Producer("PG_DURABLE", pair.namesrv.addr, retry_times=0) as p:
        await wait_until(answered(p, SendStatus.SEND_OK), 30, "an in-sync slave")
        workers = [asyncio.create_task(produce(p, w)) for w in range(4)]
        try:
            await wait_until(lambda: len(acked) >= 400, 60, "400 acknowledged sends")
            pair.master.proc.kill()
            pair.master.proc.wait()
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    assert pair.slave is not None
    assert pair.slave.stop() == 0
    pair.slave = None
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=pair.store("slave"), mapped_file_size_commit_log=256 * 1024
        ),
        clock=SYSTEM_CLOCK,
    )
    store.open()
    try:
        missing = [
            body for phy, body in acked
            if (m := store.look_message_by_offset(phy)) is None or m.body != body
        ]  # fmt: skip
    finally:
        store.close()
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages are not on the slave"
    assert commitlog_is_prefix(pair.store("slave"), pair.store("master"))


def test_a_broker_whose_ha_port_is_taken_says_so_and_closes_its_store(tmp_path: Path) -> None:
    for _ in range(5):
        with socket.socket() as taken:  # the listen port + 1: RocketMQ's default haListenPort
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1] - 1
            out = subprocess.run(
                [sys.executable, "-m", "pocketmq.cli", "broker", "--listen", f"127.0.0.1:{port}",
                 "--store", str(tmp_path / "store"), "--grpc-port", "0"],
                capture_output=True, text=True, timeout=60, cwd=tmp_path,
                env={**os.environ, "HOME": str(tmp_path)},
            )  # fmt: skip
        if f"('127.0.0.1', {port})" not in out.stderr:
            break  # else another test's server held the listen port itself: try another
    assert out.returncode == 1, out.stderr
    assert f"haListenPort {port + 1} (the listen port + 1 unless set)" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "store" / "abort").exists()  # the store was closed cleanly
