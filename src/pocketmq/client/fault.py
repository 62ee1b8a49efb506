"""Queue selection for sends, with RocketMQ's broker latency fault tolerance (MQFaultStrategy).

Without fault tolerance (the default, ``send_latency_fault_enable=False``), sends go round robin
over the topic's queues and a retry only skips the broker that just failed. With it, every send
records its broker's latency: a slow answer or a failure makes the broker "not available" for a
time looked up in two tables (a failure counts as 30 s of latency: ten minutes out), and
selection prefers available brokers.

"Not available" windows are read on an injected clock (the client instance's), so a test moves
through them with a FakeClock. No I/O here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pocketmq.client.route import MessageQueue
from pocketmq.clock import SYSTEM_CLOCK, Clock

LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency_ms: float
    start_ms: float  # available again from this time (the clock's monotonic reading, in ms)

    def is_available(self, now_ms: float) -> bool:
        return now_ms >= self.start_ms


class LatencyFaultTolerance:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which = itertools.count()

    def _now_ms(self) -> float:
        # Monotonic: the windows are only compared here, and must not move with the wall clock.
        return self.clock.monotonic() * 1000

    def update(self, name: str, latency_ms: float, not_available_ms: float) -> None:
        self.items[name] = FaultItem(name, latency_ms, self._now_ms() + not_available_ms)

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self._now_ms())

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """Among faulty brokers, one of the better half (available first, then lowest latency,
        then soonest back), taken in turn so that they share the load."""
        if not self.items:
            return None
        now = self._now_ms()
        ranked = sorted(
            self.items.values(),
            key=lambda i: (not i.is_available(now), i.current_latency_ms, i.start_ms),
        )
        half = max(1, len(ranked) // 2)
        return ranked[next(self._which) % half].name


class QueueSelector:
    """Round robin over a topic's writable queues, skipping faulty brokers when enabled."""

    def __init__(
        self,
        send_latency_fault_enable: bool = False,
        latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if len(latency_max_ms) != len(not_available_duration_ms):
            raise ValueError("latency_max_ms and not_available_duration_ms differ in length")
        self.enabled = send_latency_fault_enable
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_duration_ms = tuple(not_available_duration_ms)
        self.fault = LatencyFaultTolerance(clock)
        # Random start, as RocketMQ's ThreadLocalIndex, so producers do not all begin at queue 0.
        self._index = itertools.count(random.randrange(1 << 16))

    def select(self, queues: Sequence[MessageQueue], last_broker: str | None) -> MessageQueue:
        if not queues:
            raise ValueError("no queue to select from")
        n = len(queues)
        if self.enabled:
            start = next(self._index)
            for i in range(n):
                mq = queues[(start + i) % n]
                if self.fault.is_available(mq.broker_name) and mq.broker_name != last_broker:
                    return mq
            not_best = self.fault.pick_one_at_least()
            candidates = [mq for mq in queues if mq.broker_name == not_best]
            if candidates:
                return candidates[next(self._index) % len(candidates)]
            if not_best is not None:
                self.fault.remove(not_best)  # no longer in the route: forget it
            return queues[next(self._index) % n]
        start = next(self._index)
        if last_broker is not None:
            for i in range(n):
                mq = queues[(start + i) % n]
                if mq.broker_name != last_broker:
                    return mq
        return queues[start % n]

    def not_available_duration(self, latency_ms: float) -> int:
        for limit, duration in zip(
            reversed(self.latency_max_ms), reversed(self.not_available_duration_ms), strict=True
        ):
            if latency_ms >= limit:
                return duration
        return 0

    def update_fault_item(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        if self.enabled:
            duration = self.not_available_duration(
                ISOLATION_LATENCY_MS if isolation else latency_ms
            )
            self.fault.update(broker_name, latency_ms, duration)
