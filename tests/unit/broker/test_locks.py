"""Queue locks for ordered consumption: ownership, renewal, expiry and unlock."""

from __future__ import annotations

from pocketmq.broker.locks import RebalanceLockManager

Q0 = ("T", "broker-a", 0)
Q1 = ("T", "broker-a", 1)


def test_locks_are_exclusive_until_they_expire() -> None:
    locks = RebalanceLockManager(expire_ms=60_000)
    assert locks.try_lock_batch("G", [Q0, Q1], "c1", now_ms=0) == [Q0, Q1]
    assert locks.try_lock_batch("G", [Q0, Q1], "c2", now_ms=59_000) == []
    # Renewal by the owner keeps it.
    assert locks.try_lock_batch("G", [Q0], "c1", now_ms=59_000) == [Q0]
    assert locks.try_lock_batch("G", [Q0, Q1], "c2", now_ms=60_001) == [Q1]
    # Another group is independent.
    assert locks.try_lock_batch("H", [Q0], "c2", now_ms=0) == [Q0]


def test_unlock_only_by_the_owner() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("G", [Q0], "c1", now_ms=0)
    locks.unlock_batch("G", [Q0], "c2")
    assert locks.try_lock_batch("G", [Q0], "c2", now_ms=1) == []
    locks.unlock_batch("G", [Q0], "c1")
    assert locks.try_lock_batch("G", [Q0], "c2", now_ms=2) == [Q0]
