"""What the dashboard's charts draw: every broker's write rate (bytes/s from its CommitLog max
offset) and, where the broker reports them, its put and get TPS, and the lag of consumer
groups, sampled every few seconds into a bounded history. A broker that does not answer
leaves a gap; the loop goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass

from pocketmq.admin import AdminClient, AdminError
from pocketmq.admin.cluster import broker_rows
from pocketmq.admin.groups import group_names, group_progress
from pocketmq.clock import Clock, SystemClock
from pocketmq.protocol.names import is_system_group

log = logging.getLogger(__name__)

# The lag of at most this many groups is sampled (one GET_CONSUME_STATS per master each).
MAX_SAMPLED_GROUPS = 20


@dataclass(frozen=True, slots=True)
class Sample:
    t: float  # unix seconds
    max_offset: int
    put_tps: float | None
    get_tps: float | None


def _first_tps(value: str | None) -> float | None:
    """RocketMQ's putTps is "tps10s tps1min tps10min": the 10-second figure."""
    if not value:
        return None
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return None


class Sampler:
    def __init__(
        self, admin: AdminClient, *, interval_s: float = 10.0, keep: int = 360,
        clock: Clock | None = None,
    ) -> None:  # fmt: skip
        self.admin = admin
        self.interval_s = interval_s
        self.keep = keep
        self.clock = clock if clock is not None else SystemClock()
        self.history: dict[str, deque[Sample]] = {}
        self.lag_history: dict[str, deque[tuple[float, float]]] = {}

    def record(self, addr: str, info: dict[str, str]) -> None:
        sample = Sample(
            self.clock.now_ms() / 1000,
            int(info.get("commitLogMaxOffset", "0") or 0),
            _first_tps(info.get("putTps")),
            _first_tps(info.get("getTransferedTps")),
        )
        self.history.setdefault(addr, deque(maxlen=self.keep)).append(sample)

    def record_lag(self, group: str, lag: int) -> None:
        history = self.lag_history.setdefault(group, deque(maxlen=self.keep))
        history.append((self.clock.now_ms() / 1000, float(lag)))

    async def sample_once(self) -> None:
        for row in await broker_rows(self.admin):
            if row.info:  # an unreachable broker leaves a gap
                self.record(row.addr, row.info)
        groups = [g for g in await group_names(self.admin) if not is_system_group(g)]
        for group in groups[:MAX_SAMPLED_GROUPS]:
            try:
                self.record_lag(group, (await group_progress(self.admin, group)).lag)
            except AdminError as exc:
                log.info("dashboard: no consume stats of %s: %s", group, exc)

    async def run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except AdminError as exc:
                log.warning("dashboard: sampling failed: %s", exc)
            await asyncio.sleep(self.interval_s)

    def write_rate(self, addr: str) -> list[tuple[float, float]]:
        """Bytes written per second between consecutive samples."""
        samples = list(self.history.get(addr, ()))
        return [
            (b.t, max(0, b.max_offset - a.max_offset) / (b.t - a.t))
            for a, b in itertools.pairwise(samples)
            if b.t > a.t
        ]

    def tps(self, addr: str, which: str) -> list[tuple[float, float]]:
        """The broker's own put or get TPS ("put" / "get") where it reports them."""
        out = []
        for s in self.history.get(addr, ()):
            value = s.put_tps if which == "put" else s.get_tps
            if value is not None:
                out.append((s.t, value))
        return out
