"""Queue locks for ordered consumption: ownership, renewal, expiry (RocketMQ's
REBALANCE_LOCK_MAX_LIVE_TIME, 60 s) and unlock, on a fake clock."""

from __future__ import annotations

from pocketmq.broker.locks import RebalanceLockManager
from pocketmq.clock import FakeClock

Q0 = ("T", "broker-a", 0)
Q1 = ("T", "broker-a", 1)


def test_locks_are_exclusive_until_they_expire() -> None:
    clock = FakeClock(0)
    locks = RebalanceLockManager(expire_ms=60_000, clock=clock)
    assert locks.try_lock_batch("G", [Q0, Q1], "c1") == [Q0, Q1]
    clock.advance(59_000)
    assert locks.try_lock_batch("G", [Q0, Q1], "c2") == []
    # Renewal by the owner keeps it.
    assert locks.try_lock_batch("G", [Q0], "c1") == [Q0]
    clock.advance(1_001)
    assert locks.try_lock_batch("G", [Q0, Q1], "c2") == [Q1]
    # Another group is independent.
    assert locks.try_lock_batch("H", [Q0], "c2") == [Q0]


def test_unlock_only_by_the_owner() -> None:
    clock = FakeClock(0)
    locks = RebalanceLockManager(clock=clock)
    locks.try_lock_batch("G", [Q0], "c1")
    locks.unlock_batch("G", [Q0], "c2")
    clock.advance(1)
    assert locks.try_lock_batch("G", [Q0], "c2") == []
    locks.unlock_batch("G", [Q0], "c1")
    clock.advance(1)
    assert locks.try_lock_batch("G", [Q0], "c2") == [Q0]


def test_a_lock_lives_60_seconds_from_its_last_renewal() -> None:
    clock = FakeClock()
    locks = RebalanceLockManager(clock=clock)  # RocketMQ's default max live time
    assert locks.try_lock_batch("G", [Q0], "c1") == [Q0]
    clock.advance(30_000)
    assert locks.try_lock_batch("G", [Q0], "c1") == [Q0]  # renewed: 60 s from here
    clock.advance(60_000)
    assert locks.has_live_locks("G")
    assert locks.try_lock_batch("G", [Q0], "c2") == []  # exactly 60 s: still c1's
    clock.advance(1)
    assert not locks.has_live_locks("G")
    assert locks.try_lock_batch("G", [Q0], "c2") == [Q0]
    assert locks.has_live_locks("G") and not locks.has_live_locks("H")
