"""FailoverCoordinator against a real ZooKeeper process: elections, lease expiry, truncation
points, stale masters, and ZooKeeper itself stopped or killed (no split brain)."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from zk_process import ZooKeeperProcess

from pocketmq.broker.failover import (
    FailoverCoordinator,
    FailoverSettings,
    MasterInfo,
    NotMasterError,
    Role,
    SyncStateSet,
    zk_ops,
)
from waiting import wait_until

# Every test here takes seconds; a hang must not cost the suite the global 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(90)]

SESSION_MS = 2000
TIMEOUT_S = SESSION_MS / 1000
_roots = itertools.count()


class FakeBroker:
    """The broker side of the RoleListener: its log is just a max offset."""

    def __init__(self, max_offset: int) -> None:
        self.max_offset = max_offset
        self.masterships: list[int] = []
        self.follows: list[tuple[MasterInfo, int]] = []

    async def become_master(self, epoch: int) -> None:
        self.masterships.append(epoch)

    async def become_slave(self, master: MasterInfo, truncate_to: int) -> None:
        assert truncate_to <= self.max_offset
        self.max_offset = truncate_to
        self.follows.append((master, truncate_to))


@pytest.fixture
async def cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[[str, int, int], FailoverCoordinator]]:
    root = f"/t{next(_roots)}-{int(time.time())}"
    made: list[FailoverCoordinator] = []

    def make(zk_address: str, broker_id: int, max_offset: int) -> FailoverCoordinator:
        broker = FakeBroker(max_offset)
        settings = FailoverSettings(
            zk_address=zk_address, session_timeout_ms=SESSION_MS, zk_root=root,
            cluster="C", broker_name="broker-a", broker_id=broker_id,
            addr=f"127.0.0.1:{10000 + broker_id}", ha_addr=f"127.0.0.1:{20000 + broker_id}",
            store_root=tmp_path / f"store{broker_id}",
        )  # fmt: skip
        coordinator = FailoverCoordinator(settings, broker, lambda: broker.max_offset)
        coordinator.broker = broker  # type: ignore[attr-defined]
        made.append(coordinator)
        return coordinator

    yield make
    for c in made:
        await c.stop()


def broker_of(c: FailoverCoordinator) -> FakeBroker:
    broker: FakeBroker = c.broker  # type: ignore[attr-defined]
    return broker


def masters(coordinators: list[FailoverCoordinator]) -> list[int]:
    return [c.settings.broker_id for c in coordinators if c.may_accept_writes()]


async def expire_session(zk: ZooKeeperProcess, c: FailoverCoordinator) -> None:
    """kazoo's own test trick: a second client on the same session id closes the session."""
    assert c._client is not None
    other = KazooClient(hosts=zk.address, client_id=c._client.client_id)
    await asyncio.to_thread(other.start, 10)
    await asyncio.to_thread(other.stop)
    await asyncio.to_thread(other.close)


async def master_with_in_sync_slave(
    cluster: Callable[[str, int, int], FailoverCoordinator], address: str, offset: int
) -> tuple[FailoverCoordinator, FailoverCoordinator]:
    """Broker 1 (``offset`` bytes) elected first; broker 2 following, caught up, in the set."""
    a, b = cluster(address, 1, offset), cluster(address, 2, 0)
    await a.start()
    await wait_until(a.may_accept_writes, 10, "a to lead")
    await b.start()
    await wait_until(lambda: b.role is Role.SLAVE, 10, "b to follow")
    broker_of(b).max_offset = offset
    await a.expand_sync_state_set([2])
    return a, b


async def test_three_contenders_elect_one_master_with_the_most_data(zookeeper, cluster) -> None:
    group = [cluster(zookeeper.address, i, offset) for i, offset in ((1, 100), (2, 300), (3, 200))]
    await asyncio.gather(*(c.start() for c in group))
    await wait_until(lambda: masters(group) == [2], 10, lambda: f"one master: {masters(group)}")
    await wait_until(lambda: all(c.role is not Role.UNDECIDED for c in group), 10, "roles")
    first, master, third = group
    assert broker_of(master).masterships == [1]
    assert master.epochs.entries[-1].epoch == 1 and master.epochs.entries[-1].start_offset == 300
    # Both logs are prefixes of epoch 0, which the new master holds whole: nothing is cut.
    assert broker_of(first).follows == [(master.master, 100)]
    assert broker_of(third).follows == [(master.master, 200)]
    assert [c.role for c in group] == [Role.SLAVE, Role.MASTER, Role.SLAVE]
    assert first.epochs.entries == master.epochs.entries


async def test_master_expiry_elects_the_in_sync_slave_and_cuts_the_old_master(
    zookeeper, cluster
) -> None:
    a, b, c = (cluster(zookeeper.address, i, 1000 if i == 1 else 0) for i in (1, 2, 3))
    await a.start()
    await wait_until(a.may_accept_writes, 10, "the first broker to lead")
    await asyncio.gather(b.start(), c.start())
    await wait_until(lambda: b.role is c.role is Role.SLAVE, 10, "two slaves")
    # b catches up and joins the set; c lags behind, out of it. a writes on: 1000 -> 1500,
    # b copies up to 1400 (the master acknowledged at most that much: b is in the set).
    broker_of(b).max_offset = 1000
    await a.expand_sync_state_set([2])
    assert a.sync_state_set == SyncStateSet(1, frozenset({1, 2}))
    broker_of(a).max_offset, broker_of(b).max_offset, broker_of(c).max_offset = 1500, 1400, 700

    await expire_session(zookeeper, a)
    # The fence of the old master closes within the session timeout.
    await wait_until(lambda: not a.may_accept_writes(), TIMEOUT_S, "a's fence to close")
    await wait_until(b.may_accept_writes, 4 * TIMEOUT_S, "b to be elected")
    assert broker_of(b).masterships == [2]
    assert b.epochs.entries[-1].epoch == 2 and b.epochs.entries[-1].start_offset == 1400
    # a wrote 1400..1500 in epoch 1, which the new history gives to epoch 2: cut at 1400.
    await wait_until(lambda: a.role is Role.SLAVE, 4 * TIMEOUT_S, "a to follow b")
    assert broker_of(a).follows[-1] == (b.master, 1400)
    assert broker_of(a).max_offset == 1400
    # c never was in the set: it follows, its 700 bytes of epoch 1 kept.
    await wait_until(lambda: c.master == b.master, 4 * TIMEOUT_S, "c to follow b")
    assert broker_of(c).follows[-1] == (b.master, 700)
    assert masters([a, b, c]) == [2]


async def test_a_broker_outside_the_sync_state_set_never_wins(zookeeper, cluster) -> None:
    a, b = cluster(zookeeper.address, 1, 500), cluster(zookeeper.address, 2, 0)
    await a.start()
    await wait_until(a.may_accept_writes, 10, "a to lead")
    await b.start()
    await wait_until(lambda: b.role is Role.SLAVE, 10, "b to follow")
    broker_of(b).max_offset = 500  # even with every byte, b is not in the set
    await a.stop()
    await wait_until(
        lambda: b.last_refusal is not None and "not in the sync-state set" in b.last_refusal,
        4 * TIMEOUT_S,
        "b to decline",
    )
    # The behaviour under test is that nothing happens: several election rounds pass.
    await asyncio.sleep(2 * TIMEOUT_S)
    assert not b.may_accept_writes() and broker_of(b).masterships == []
    assert b._client is not None and b._client.exists(b.paths.master) is None


async def test_a_stale_master_cannot_write_the_sync_state_set(zookeeper, cluster) -> None:
    a, b = await master_with_in_sync_slave(cluster, zookeeper.address, 300)
    stale_lease = a._lease
    assert stale_lease is not None
    await a.stop()  # a dies; b, in the set, takes epoch 2
    await wait_until(b.may_accept_writes, 4 * TIMEOUT_S, "b to be elected")
    assert b.epoch == 2

    writer = KazooClient(hosts=zookeeper.address)
    await asyncio.to_thread(writer.start, 10)
    try:
        with pytest.raises(NotMasterError):
            await asyncio.to_thread(
                zk_ops.write_sync_state_set,
                writer, b.paths, stale_lease, SyncStateSet(1, frozenset({1})),
            )  # fmt: skip
        state = await asyncio.to_thread(zk_ops.read_state, writer, b.paths)
    finally:
        await asyncio.to_thread(writer.stop)
        await asyncio.to_thread(writer.close)
    assert state.sync_state_set == SyncStateSet(2, frozenset({2}))
    with pytest.raises(NotMasterError):
        await a.shrink_sync_state_set([2])
    # The master of epoch 2 can.
    broker_of(a).max_offset = 0
    assert await b.expand_sync_state_set([1]) == SyncStateSet(2, frozenset({1, 2}))


def answer_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next sync-state set write lands in ZooKeeper, but its answer is lost (kazoo raises
    ConnectionLoss, as when the connection drops after the commit)."""
    real = zk_ops.write_sync_state_set

    def landed_then_lost(*args: Any) -> zk_ops.Lease:
        real(*args)
        monkeypatch.setattr(zk_ops, "write_sync_state_set", real)
        raise ConnectionLoss("the answer was lost")

    monkeypatch.setattr(zk_ops, "write_sync_state_set", landed_then_lost)


async def stored_set(c: FailoverCoordinator) -> SyncStateSet:
    assert c._client is not None
    state = await asyncio.to_thread(zk_ops.read_state, c._client, c.paths)
    return state.sync_state_set


async def test_a_write_whose_answer_was_lost_neither_ends_the_lease_nor_is_forgotten(
    zookeeper, cluster, monkeypatch
) -> None:
    a, b = await master_with_in_sync_slave(cluster, zookeeper.address, 100)
    answer_lost(monkeypatch)
    with pytest.raises(NotMasterError, match="not written"):
        await a.shrink_sync_state_set([2])
    assert await stored_set(a) == SyncStateSet(1, frozenset({1}))
    # The next write meets a newer version of the set than the lease names: its own, not a
    # sign of a lost lease.
    assert await a.expand_sync_state_set([2]) == SyncStateSet(1, frozenset({1, 2}))
    assert a.may_accept_writes() and a.role is Role.MASTER
    assert await stored_set(a) == SyncStateSet(1, frozenset({1, 2}))

    # An expansion that landed unseen, then a shrink back to what the master believed: it is
    # written (else ZooKeeper would name a slave the master no longer waits for).
    await a.shrink_sync_state_set([2])
    answer_lost(monkeypatch)
    with pytest.raises(NotMasterError, match="not written"):
        await a.expand_sync_state_set([2])
    assert await a.shrink_sync_state_set([2]) == SyncStateSet(1, frozenset({1}))
    assert await stored_set(a) == SyncStateSet(1, frozenset({1}))
    assert masters([a, b]) == [1]


async def test_zookeeper_stopped_or_killed_leaves_no_broker_writing(own_zookeeper, cluster) -> None:
    zk = own_zookeeper
    a, b = await master_with_in_sync_slave(cluster, zk.address, 100)

    zk.signal(signal.SIGSTOP)
    # The lease's fence closes before ZooKeeper could expire the session.
    await wait_until(lambda: not a.may_accept_writes(), TIMEOUT_S, "a's fence to close")
    # The behaviour under test is that nothing happens: past the session timeout, no broker
    # believes it may write, however long ZooKeeper stays away.
    deadline = time.monotonic() + 2 * TIMEOUT_S
    while time.monotonic() < deadline:
        assert masters([a, b]) == []
        await asyncio.sleep(0.05)

    zk.signal(signal.SIGCONT)
    await wait_until(lambda: len(masters([a, b])) == 1, 6 * TIMEOUT_S, "one master again")

    zk.signal(signal.SIGKILL)
    await wait_until(lambda: masters([a, b]) == [], TIMEOUT_S, "every fence to close")
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        assert masters([a, b]) == []
        await asyncio.sleep(0.05)
