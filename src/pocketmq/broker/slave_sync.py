"""SlaveSynchronize: a slave copies its master's metadata, which replication does not carry.

Each round asks the master (the remoting address the NameServer named when the slave
registered) for four tables and installs each, in RocketMQ's order:

- topics (GET_ALL_TOPIC_CONFIG 21): taken whole when the master's dataVersion differs;
- consumer offsets (GET_ALL_CONSUMER_OFFSET 43): the master's groups and queues overwrite
  the slave's, the others stay (a put-all);
- delay-level progress (GET_ALL_DELAY_OFFSET 45): taken whole;
- subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201): as topics.

Each table is persisted once installed. A step that fails (no answer, an error code, a body
that does not parse) is logged and the others still run; the next round tries again. The
broker runs the rounds (``Broker.start_slave_sync``); the data path itself, the CommitLog
bytes, is replication's (``store/ha``), not this module's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pocketmq.errors import PocketMQError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# How long one request to the master may take (BrokerOuterAPI's 3 s).
SYNC_TIMEOUT_S = 3.0


class SyncError(PocketMQError):
    """The master refused a sync request or answered something that does not parse."""


def offset_table(body: Any) -> dict[str, dict[int, int]]:
    """The offsetTable of a ConsumerOffsetSerializeWrapper: ``topic@group`` -> queue -> offset.

    Raises:
        SyncError: it is not that shape.
    """
    table = _offset_table(body, "consumer offsets")
    try:
        return {str(k): {int(q): int(o) for q, o in qs.items()} for k, qs in table.items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise SyncError(f"malformed consumer offsets: {exc}") from exc


def delay_offset_table(body: Any) -> dict[int, int]:
    """The offsetTable of delayOffset.json: delay level -> next queue offset.

    Raises:
        SyncError: it is not that shape.
    """
    table = _offset_table(body, "delay offsets")
    try:
        return {int(level): int(offset) for level, offset in table.items()}
    except (TypeError, ValueError) as exc:
        raise SyncError(f"malformed delay offsets: {exc}") from exc


def _offset_table(body: Any, what: str) -> dict[Any, Any]:
    """Raises: SyncError: ``body`` has no offsetTable object (null counts as empty)."""
    table = body.get("offsetTable", ...) if isinstance(body, dict) else ...
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise SyncError(f"malformed {what}: no offsetTable object")
    return table


class SlaveSynchronize:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def sync_all(self, master_addr: str) -> None:
        """One round: each table from ``master_addr`` (a failing one is logged and skipped)."""
        steps: list[tuple[str, Callable[[str], Awaitable[None]]]] = [
            ("topic configs", self.sync_topics),
            ("consumer offsets", self.sync_consumer_offsets),
            ("delay offsets", self.sync_delay_offsets),
            ("subscription groups", self.sync_subscription_groups),
        ]
        for what, step in steps:
            try:
                await step(master_addr)
            except (SyncError, ConnectionError, TimeoutError) as exc:
                log.warning("syncing %s from master %s failed: %s", what, master_addr, exc)
            except Exception:  # a task boundary: the next table and the next round still run
                log.exception("syncing %s from master %s failed", what, master_addr)

    async def _fetch(self, master_addr: str, code: int) -> Any:
        """Raises: SyncError, ConnectionError, TimeoutError."""
        resp = await self.broker.namesrv_client.invoke(
            master_addr, RemotingCommand.request(code), SYNC_TIMEOUT_S
        )
        if resp.code != ResponseCode.SUCCESS:
            raise SyncError(f"request {code} answered {resp.code}: {resp.remark}")
        try:
            return json_body.loads(resp.body)
        except PocketMQError as exc:
            raise SyncError(f"request {code}: the body is not JSON: {exc}") from exc

    async def sync_topics(self, master_addr: str) -> None:
        topics = self.broker.topics
        await self._install(master_addr, RequestCode.GET_ALL_TOPIC_CONFIG, topics.install,
                            "topic configs")  # fmt: skip

    async def sync_consumer_offsets(self, master_addr: str) -> None:
        body = await self._fetch(master_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        self.broker.offsets.put_all(offset_table(body))

    async def sync_delay_offsets(self, master_addr: str) -> None:
        body = await self._fetch(master_addr, RequestCode.GET_ALL_DELAY_OFFSET)
        self.broker.schedule.install(delay_offset_table(body))

    async def sync_subscription_groups(self, master_addr: str) -> None:
        groups = self.broker.subscription_groups
        await self._install(master_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                            groups.install, "subscription groups")  # fmt: skip

    async def _install(
        self, master_addr: str, code: int, install: Callable[[Any], bool], what: str
    ) -> None:
        """A versioned table (topics, groups): taken when the master's version differs.

        Raises:
            SyncError, ConnectionError, TimeoutError.
        """
        wrapper = await self._fetch(master_addr, code)
        try:
            if install(wrapper):
                log.info("%s taken from master %s", what, master_addr)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SyncError(f"malformed {what}: {exc}") from exc
