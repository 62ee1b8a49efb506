"""Client settings the integration tests share."""

from __future__ import annotations

from typing import Any

from pocketmq.client import ConsumeFromWhere

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
