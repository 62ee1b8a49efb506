"""Brokers under automatic failover as real processes (NameServer, ZooKeeper, three brokers
of one brokerName), driven by our client:

- SYNC_MASTER + SYNC_FLUSH, the master SIGKILLed three times under a sync producer: a new
  master each time, each killed broker restarted and following; afterwards every
  acknowledged message is consumable (lost must be 0; duplicates are reported, as OpenChaos
  counts them), a restarted old master refuses writes, and every broker's CommitLog is a
  byte-identical prefix of the final master's (the old masters were cut at the epoch
  boundary and caught up);
- ASYNC_MASTER: the loss window of one kill, measured and printed;
- ZooKeeper stopped (SIGSTOP): the master refuses sends within the session timeout, no
  second master appears, and sends resume after SIGCONT; a broker told to stop (SIGTERM)
  meanwhile exits cleanly within two session timeouts (0.97 s measured).
"""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from failover_set import (
    SESSION_MS,
    TOPIC,
    FailoverSet,
    commitlog_is_prefix,
    consumable,
    converged,
    create_topic,
    elected,
    following,
    producer_for,
    raw_send,
    stop_all,
)
from zk_process import ZooKeeperProcess

from pocketmq.client import Producer, SendStatus, message
from pocketmq.client.instance import ClientInstance
from pocketmq.errors import PocketMQError
from pocketmq.protocol.codes import ResponseCode
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def fo_factory(tmp_path: Path) -> Iterator[list[FailoverSet]]:
    made: list[FailoverSet] = []
    yield made
    stop_all(made)


@pytest.fixture
async def client() -> AsyncIterator[ClientInstance]:
    instance = ClientInstance("127.0.0.1:1", "fo-test@1", poll_name_server_interval_s=3600)
    yield instance
    await instance.close()


class Load:
    """A sync producer sending numbered messages one after another (OpenChaos' producer):
    each is sent once; its own retries are the client's."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acked: list[int] = []
        self.failed = 0
        self.not_ok: collections.Counter[str] = collections.Counter()
        self.last_ack_at = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        n = 0
        while True:
            n += 1
            try:
                result = await self.producer.send(message(TOPIC, f"m-{n}".encode()))
            except (PocketMQError, ConnectionError, TimeoutError):
                self.failed += 1
                # Backoff while no broker takes writes (the client refreshes its route).
                await asyncio.sleep(0.05)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked.append(n)
                self.last_ack_at = time.monotonic()
            else:
                self.not_ok[result.status.name] += 1

    async def progress(self, more: int, timeout_s: float) -> None:
        target = len(self.acked) + more
        await wait_until(
            lambda: len(self.acked) >= target,
            timeout_s,
            lambda: f"{more} more acks (at {len(self.acked)}, failed {self.failed})",
        )


async def test_sync_master_kill_loop_loses_no_acknowledged_message(
    tmp_path: Path, zookeeper: ZooKeeperProcess, client: ClientInstance,
    fo_factory: list[FailoverSet],
) -> None:  # fmt: skip
    fo = FailoverSet(tmp_path, zookeeper.address)
    fo_factory.append(fo)
    master = await elected(fo, client)
    await create_topic(client, fo.addr(master))
    for other in fo.procs:
        if other != master:
            await following(fo, client, other)
    producer = producer_for(fo)
    await producer.start()
    load = Load(producer)
    load.start()
    failover_s = []
    try:
        for _ in range(3):
            await load.progress(50, 30)
            killed_at = time.monotonic()
            fo.kill(master)
            old, master = master, await elected(fo, client, other_than=master)
            await load.progress(1, 30)
            failover_s.append(load.last_ack_at - killed_at)
            fo.start(old)
            await following(fo, client, old)
            # The old master came back as a slave: it serves no write of its stale epoch.
            assert await raw_send(client, fo.addr(old)) == ResponseCode.SERVICE_NOT_AVAILABLE
        await load.progress(50, 30)
    finally:
        await load.stop()
        await producer.shutdown()
    await converged(fo, client)
    seen = await consumable(client, fo.addr(master))
    lost = [n for n in load.acked if n not in seen]
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    print(f"\nSYNC_MASTER kill loop: {len(load.acked)} acknowledged, {load.failed} failed, "
          f"not ok {dict(load.not_ok)}, lost {len(lost)}, duplicated {duplicated}, "
          f"failover s {[round(s, 2) for s in failover_s]}")  # fmt: skip
    assert lost == []
    for broker_id in fo.procs:
        assert commitlog_is_prefix(fo.store(broker_id), fo.store(master)), broker_id


async def test_async_master_loss_window_is_measured(
    tmp_path: Path, zookeeper: ZooKeeperProcess, client: ClientInstance,
    fo_factory: list[FailoverSet],
) -> None:  # fmt: skip
    conf = {"brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH"}
    fo = FailoverSet(tmp_path, zookeeper.address, brokers=2, conf=conf)
    fo_factory.append(fo)
    master = await elected(fo, client)
    await create_topic(client, fo.addr(master))
    slave = next(b for b in fo.procs if b != master)
    await following(fo, client, slave)
    # `pocketmq admin broker-status`: the master as id 0 with its epoch, the slave with a lag.
    status = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", fo.namesrv.addr, "broker-status"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    lines = {line.split()[2]: line.split() for line in status.stdout.splitlines()[1:]}
    assert lines["0"][3:6] == [fo.addr(master), "ASYNC_MASTER", "1"], status.stdout
    assert lines[str(slave)][3:5] == [fo.addr(slave), "SLAVE"], status.stdout
    assert lines[str(slave)][7] != "-", status.stdout  # its lag in bytes, read from the master
    producer = producer_for(fo)
    await producer.start()
    load = Load(producer)
    load.start()
    try:
        await load.progress(300, 30)
        fo.kill(master)
        acked_at_kill = list(load.acked)
        new_master = await elected(fo, client, other_than=master)
        assert new_master == slave
        await load.progress(20, 30)
    finally:
        await load.stop()
        await producer.shutdown()
    seen = await consumable(client, fo.addr(new_master))
    lost = [n for n in acked_at_kill if n not in seen]
    print(f"\nASYNC_MASTER: {len(acked_at_kill)} acknowledged before the kill, lost {len(lost)}")
    # What ASYNC_MASTER promises: the new master holds a prefix of what was acknowledged (it
    # lost at most the last messages the slave had not copied), and takes writes again.
    assert lost == acked_at_kill[len(acked_at_kill) - len(lost) :]
    assert len(load.acked) > len(acked_at_kill)


async def test_zookeeper_unreachable_fences_the_master_and_writes_resume(
    tmp_path: Path, own_zookeeper: ZooKeeperProcess, client: ClientInstance,
    fo_factory: list[FailoverSet],
) -> None:  # fmt: skip
    fo = FailoverSet(tmp_path, own_zookeeper.address, brokers=2)
    fo_factory.append(fo)
    master = await elected(fo, client)
    await create_topic(client, fo.addr(master))
    slave = next(b for b in fo.procs if b != master)
    await following(fo, client, slave)

    async def send_code(broker_id: int) -> int:
        return await raw_send(client, fo.addr(broker_id))

    await wait_until(lambda: _is(send_code(master), ResponseCode.SUCCESS), 30, "a write taken")
    own_zookeeper.signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        await wait_until(lambda: _is(send_code(master), ResponseCode.SERVICE_NOT_AVAILABLE),
                         SESSION_MS / 1000 * 2, "the master refusing writes")  # fmt: skip
        fenced_after = time.monotonic() - stopped_at
        assert fenced_after < SESSION_MS / 1000 + 1
        # No second master while ZooKeeper is away: the slave still refuses writes.
        for _ in range(5):
            assert await send_code(slave) == ResponseCode.SERVICE_NOT_AVAILABLE
            assert await send_code(master) == ResponseCode.SERVICE_NOT_AVAILABLE
    finally:
        own_zookeeper.signal(signal.SIGCONT)
    await wait_until(lambda: _is(send_code(master), ResponseCode.SUCCESS), 30, "writes resuming")
    assert await send_code(slave) == ResponseCode.SERVICE_NOT_AVAILABLE


async def _is(code: asyncio.Future[int] | object, wanted: int) -> bool:
    assert asyncio.iscoroutine(code)
    return bool(await code == wanted)


async def test_a_broker_whose_zookeeper_hangs_still_stops(
    tmp_path: Path, own_zookeeper: ZooKeeperProcess, client: ClientInstance,
    fo_factory: list[FailoverSet],
) -> None:  # fmt: skip
    """SIGTERM while ZooKeeper answers nothing (SIGSTOP): the broker gives up closing its
    session after a session timeout and exits, rather than wait for ever on a worker thread
    stuck in the ZooKeeper client (asyncio.run joins its executor's threads at exit)."""
    fo = FailoverSet(tmp_path, own_zookeeper.address, brokers=1)
    fo_factory.append(fo)
    proc = fo.procs[await elected(fo, client)].proc
    own_zookeeper.signal(signal.SIGSTOP)
    try:
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(_exit_code, proc, 30)
        took = time.monotonic() - stopped_at
    finally:
        own_zookeeper.signal(signal.SIGCONT)
    assert code == 0, f"exit code {code} after {took:.1f} s"
    assert took < SESSION_MS / 1000 * 2 + 3


def _exit_code(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None
