"""Queue locks for ordered consumption (RebalanceLockManager).

A client of a group holds a message queue while it renews the lock (clients do so every
20 s); a lock not renewed for ``expire_ms`` (60 s) may be taken by another client of the group.
Expiry is read from the injected clock. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.clock import SYSTEM_CLOCK, Clock

MessageQueueKey = tuple[str, str, int]  # topic, broker name, queue id


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, expire_ms: int = 60_000, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.expire_ms = expire_ms
        self.clock = clock
        self._table: dict[str, dict[MessageQueueKey, _Lock]] = {}

    def try_lock_batch(
        self, group: str, queues: list[MessageQueueKey], client_id: str
    ) -> list[MessageQueueKey]:
        """Lock what is free, expired or already ours; returns the queues now held."""
        now_ms = self.clock.now_ms()
        locks = self._table.setdefault(group, {})
        held = []
        for mq in queues:
            lock = locks.get(mq)
            if (
                lock is None
                or lock.client_id == client_id
                or (lock.last_update_ms + self.expire_ms < now_ms)
            ):
                locks[mq] = _Lock(client_id, now_ms)
                held.append(mq)
        return held

    def unlock_batch(self, group: str, queues: list[MessageQueueKey], client_id: str) -> None:
        locks = self._table.get(group, {})
        for mq in queues:
            lock = locks.get(mq)
            if lock is not None and lock.client_id == client_id:
                del locks[mq]

    def has_live_locks(self, group: str) -> bool:
        """Whether some client of the group holds an unexpired lock: an ordered group."""
        now = self.clock.now_ms()
        return any(
            lock.last_update_ms + self.expire_ms >= now
            for lock in self._table.get(group, {}).values()
        )
