"""What the integration tests of our client share: short client intervals and a listener
that records what it gets."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.client import ConsumeContext, ConsumeFromWhere, ConsumeResult, MessageExt

# Short client intervals so that rebalances and offset commits happen within a test.
FAST: dict[str, Any] = {
    "rebalance_interval_s": 1.0,
    "persist_interval_s": 0.5,
    "broker_suspend_ms": 1000,
}
# The same, for consumers that must see what was sent before they started.
FAST_FROM_FIRST: dict[str, Any] = {
    **FAST,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


class Collector:
    """A listener that records what it gets and can wait for a count."""

    def __init__(self) -> None:
        self.got: list[MessageExt] = []
        self.changed = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        self.got += msgs
        self.changed.set()
        return ConsumeResult.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        return sorted(m.body for m in self.got)

    async def wait_for(self, count: int, timeout_s: float = 20) -> None:
        async with asyncio.timeout(timeout_s):
            while len(self.got) < count:
                self.changed.clear()
                await self.changed.wait()
