"""The master's sync-state keeper against a fake coordinator and HA service: the stored set
is always a subset of the slaves a put waits for, also when a ZooKeeper write succeeds but
its answer is lost (the window a timeout leaves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from pocketmq.broker.failover.model import FailoverError, SyncStateSet
from pocketmq.broker.failover.sync_state import SyncStateKeeper
from pocketmq.clock import FakeClock

ME = 1


@dataclass
class Conn:
    slave_address: str
    slave_ack_offset: int
    lagging_ms: int = 0

    def lag_ms(self, now_ms: int) -> int:
        return self.lagging_ms


@dataclass
class HA:
    clock: FakeClock = field(default_factory=FakeClock)
    connections: list[Conn] = field(default_factory=list)
    releases: int = 0
    ack_policy: Any = None
    on_change: Any = None

    def release(self) -> None:
        self.releases += 1


@dataclass
class Settings:
    broker_id: int = ME


class Coordinator:
    """ZooKeeper's set in ``stored``; ``lose_answers`` writes it and then fails the call, as
    a request whose answer timed out."""

    def __init__(self, ids: dict[str, int]) -> None:
        self.settings = Settings()
        self.stored = frozenset({ME})
        self.sync_state_set = SyncStateSet(1, self.stored)
        self.ids = ids
        self.lose_answers = False

    async def followers(self) -> dict[str, int]:
        return dict(self.ids)

    def _write(self, ids: frozenset[int]) -> SyncStateSet:
        self.stored = ids
        if self.lose_answers:
            raise FailoverError("ZooKeeper did not answer in time")
        return SyncStateSet(1, ids)

    async def expand_sync_state_set(self, broker_ids: Any) -> SyncStateSet:
        return self._write(self.stored | set(broker_ids))

    async def shrink_sync_state_set(self, broker_ids: Any) -> SyncStateSet:
        return self._write(self.stored - set(broker_ids))


@dataclass
class Store:
    acked_through: int = 1_000


def keeper(conns: list[Conn]) -> tuple[SyncStateKeeper, Coordinator, HA, Store]:
    coordinator = Coordinator({c.slave_address: 2 + i for i, c in enumerate(conns)})
    ha = HA(connections=conns)
    store = Store()
    k = SyncStateKeeper(cast(Any, coordinator), cast(Any, ha), cast(Any, store), 3_000)
    return k, coordinator, ha, store


def stored_slaves(coordinator: Coordinator) -> frozenset[int]:
    return coordinator.stored - {ME}


async def test_a_caught_up_slave_joins_and_then_puts_wait_for_it() -> None:
    conn = Conn("s2", 1_000)
    k, coordinator, ha, _ = keeper([conn])
    assert k.covered() == -1  # nobody required: a SYNC_MASTER put is refused
    await k.step()
    assert stored_slaves(coordinator) == k.confirmed == {2}
    assert k.covered() == 1_000 and ha.releases == 1


async def test_a_slave_behind_the_acknowledged_end_does_not_join() -> None:
    k, coordinator, _, _ = keeper([Conn("s2", 999)])
    await k.step()
    assert stored_slaves(coordinator) == k.required == frozenset()


async def test_an_expansion_whose_answer_is_lost_keeps_the_slave_required() -> None:
    k, coordinator, _, _ = keeper([Conn("s2", 1_000)])
    coordinator.lose_answers = True
    with pytest.raises(FailoverError):
        await k.step()
    # ZooKeeper names the slave: puts must keep waiting for it.
    assert stored_slaves(coordinator) == {2}
    assert stored_slaves(coordinator) <= k.required
    coordinator.lose_answers = False
    await k.step()  # tried again: now confirmed
    assert k.confirmed == {2} and k.adding == frozenset()


async def test_a_removal_whose_answer_is_lost_keeps_waiting_until_confirmed() -> None:
    conn = Conn("s2", 1_000)
    k, coordinator, _, _ = keeper([conn])
    await k.step()
    conn.lagging_ms = 10_000
    coordinator.lose_answers = True
    with pytest.raises(FailoverError):
        await k.step()
    assert stored_slaves(coordinator) == frozenset()
    assert 2 in k.required  # not confirmed removed: still waited for (conservative)
    coordinator.lose_answers = False
    await k.step()
    # Confirmed removed, and it does not rejoin while it lags.
    assert k.required == frozenset() and stored_slaves(coordinator) == frozenset()
    conn.lagging_ms = 0
    await k.step()
    assert k.confirmed == {2}


async def test_a_gone_slave_leaves_before_it_stops_being_required() -> None:
    conn = Conn("s2", 1_000)
    k, coordinator, ha, _ = keeper([conn])
    await k.step()
    ha.connections.clear()
    await k.step()
    assert stored_slaves(coordinator) == k.required == frozenset()
