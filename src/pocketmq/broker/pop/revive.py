"""Revive (RocketMQ's PopReviveService): what happens to a message whose invisible time ran
out without an ack, and the loop that does it at each deadline.

- Concurrent groups: the message is copied into the group's POP retry topic
  ``%RETRY%{group}_{topic}`` with reconsume times + 1, or into ``%DLQ%{group}`` once the
  group's deliveries are spent.
- FIFO groups: nothing is copied; the queue is unblocked and the next pop redelivers it.

Both puts go through the messaging service's ``redeliver``, the one implementation of retry
and dead-letter copies that 4.x send-back shares. The loop reads time only from the injected
clock; ``revive_due`` does the due work and says how long until the next, so a test moves a
fake clock and calls it instead of sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pocketmq.broker.pop.inflight import InFlight, InFlightTable, Key
from pocketmq.clock import Clock
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.names import dlq_topic, pop_retry_topic
from pocketmq.store import MessageStore, PutResult
from pocketmq.tasks import cancel_and_wait, run_when_due

if TYPE_CHECKING:
    from pocketmq.broker.messaging import MessagingService

log = logging.getLogger(__name__)

# A revive whose put fails (disk full, store closing) is tried again after this.
RETRY_AFTER_FAILURE_MS = 1_000


class ReviveOwner(Protocol):
    """What the reviver needs of the POP service it works for."""

    @property
    def table(self) -> InFlightTable: ...

    def resolve(self, key: Key, entry: InFlight) -> None:
        """The message is done with in the group."""
        ...

    async def settle(self, key: Key, entry: InFlight) -> None:
        """Resolved, and its ack record written to the revive log."""
        ...

    def notify(self, topic: str) -> None:
        """Pops waiting on ``topic`` look again."""
        ...


class PopReviveService:
    def __init__(
        self,
        owner: ReviveOwner,
        store: MessageStore,
        messaging: MessagingService,
        clock: Clock,
        max_attempts_of: Callable[[str], int],
    ) -> None:
        self.owner = owner
        self.store = store
        self.redeliver = messaging.redeliver
        self.clock = clock
        self._max_attempts_of = max_attempts_of
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(run_when_due(self.revive_due, self._wake))

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    def wake(self) -> None:
        """The earliest deadline changed: the loop computes its wait again."""
        self._wake.set()

    async def revive_due(self) -> int | None:
        """Revive every message due by the clock; returns ms until the next deadline (None:
        nothing in flight)."""
        table = self.owner.table
        while (due := table.pop_due(self.clock.now_ms())) is not None:
            key, entry = due
            if entry.fifo:
                self.owner.notify(key[1])  # the queue is unblocked; the next pop redelivers
                continue
            try:
                await self.revive(key, entry)
            except RequestError as exc:
                log.error("revive of %s failed, retried: %s", key, exc.remark)
                entry.deadline = self.clock.now_ms() + RETRY_AFTER_FAILURE_MS
                table.schedule(key, entry)
        return table.ms_until_next(self.clock.now_ms())

    async def revive(self, key: Key, entry: InFlight) -> None:
        """An unacked message of a concurrent group: into the retry topic for another
        delivery, or into the DLQ once the group's deliveries are spent.

        Raises:
            RequestError: the put failed; the message is still in flight.
        """
        group = key[0]
        msg = self.look(key)
        if msg is None:
            log.warning("in-flight message %s is no longer stored; dropped", key)
            self.owner.resolve(key, entry)
            return
        if entry.reconsume + 1 >= self._max_attempts_of(group):
            await self.dead_letter(group, msg, key, entry)
            return
        result = await self.redeliver(
            group,
            msg,
            original_topic=entry.subscribed,
            reconsume_times=entry.reconsume + 1,
            retry_to=pop_retry_topic(group, entry.subscribed),
        )
        _check(result, "revive")
        await self.owner.settle(key, entry)

    async def dead_letter(
        self, group: str, msg: MessageExt, key: Key, entry: InFlight | None
    ) -> None:
        """Into the group's DLQ; the delivery ``entry``, if any, is settled.

        Raises:
            RequestError: the put failed.
        """
        dlq = dlq_topic(group)
        result = await self.redeliver(
            group, msg, original_topic=key[1], reconsume_times=msg.reconsume_times, retry_to=None
        )
        _check(result, "dead-letter")
        log.info("message %s of %s dead-lettered to %s", msg.uniq_key, key[1], dlq)
        if entry is not None:
            await self.owner.settle(key, entry)

    def look(self, key: Key) -> MessageExt | None:
        """The stored message at ``key``; None once retention removed it."""
        _, topic, queue_id, offset = key
        phy = self.store.get_commit_log_offset_in_queue(topic, queue_id, offset)
        return self.store.look_message_by_offset(phy) if phy >= 0 else None


def _check(result: PutResult, what: str) -> None:
    if not result.ok:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} put failed: {result.detail}")
