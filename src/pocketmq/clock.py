"""The one clock of everything that schedules or expires (POP, delay, timer, receipt renewal,
queue locks, consumers, store timestamps), injected so that tests drive time themselves.

``now_ms`` is wall-clock time in epoch milliseconds (what RocketMQ stores and compares:
delivery times, pop times, lock expiry); ``monotonic`` is seconds for measuring intervals
(long-poll deadlines). ``FakeClock`` moves only when a test advances it.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time, epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for intervals."""
        ...


class SystemClock:
    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()


class FakeClock:
    """A clock that stands still until ``advance`` moves it: both readings move together."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._now_ms += ms
