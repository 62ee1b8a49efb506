"""Orderly consumption (ConsumeMessageOrderlyService): one batch at a time per queue, in queue
order, only while this client holds the queue's lock on its broker.

A queue is locked before it is taken at a rebalance, and every lock is renewed every 20 s; a
lock not renewed for 30 s counts as lost, and consumption of that queue pauses until it is
locked again (the broker gives an expired lock to another client after 60 s). A failed batch
is put back and consumed again after ``suspend_current_queue_time_ms`` without committing, so
order holds; a message failed more than ``max_reconsume_times`` goes to the group's dead
letter queue instead. A released queue is unlocked once its last batch is done and its offset
persisted, so the next owner starts where this one stopped.

Lock liveness is read on the client instance's clock. The push consumer owns an OrderlyService
and is seen here only through ``OrderlyHost``, so imports point one way: consumer -> orderly.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pocketmq.client.consumer_config import MessageModel, PushConsumerConfig
from pocketmq.client.instance import ClientInstance
from pocketmq.client.offset_store import OffsetStore
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.route import MessageQueue
from pocketmq.clock import Clock
from pocketmq.errors import BrokerError, ClientError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.message import MessageExt

log = logging.getLogger(__name__)

LOCK_INTERVAL_S = 20.0
LOCK_MAX_LIVE_MS = 30_000
RELOCK_DELAY_S = 0.1
RELEASE_WAIT_S = 1.0


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


def is_success(status: object) -> bool:
    # An orderly listener may answer with either enum, as RocketMQ users write both.
    return (
        status is ConsumeOrderlyStatus.SUCCESS or getattr(status, "name", "") == "CONSUME_SUCCESS"
    )


def lock_time_ms(clock: Clock) -> float:
    """The time a lock taken now is stamped with: monotonic, as only this client compares it."""
    return clock.monotonic() * 1000


def lock_valid(pq: ProcessQueue, clock: Clock) -> bool:
    """Held, and renewed within LOCK_MAX_LIVE_MS (ProcessQueue.isLockExpired)."""
    return pq.locked and lock_time_ms(clock) - pq.last_lock_ms <= LOCK_MAX_LIVE_MS


class OrderlyHost(Protocol):
    """What orderly consumption needs of its push consumer."""

    group: str
    config: PushConsumerConfig
    instance: ClientInstance
    offset_store: OffsetStore
    process_queues: dict[MessageQueue, ProcessQueue]

    @property
    def client_id(self) -> str: ...

    @property
    def running(self) -> bool: ...

    def track(self, task: asyncio.Task[None]) -> None: ...

    async def run_listener(self, pq: ProcessQueue, batch: list[MessageExt]) -> Any: ...

    async def send_to_retry_topic(self, m: MessageExt, reconsume_times: int) -> bool: ...


class OrderlyService:
    def __init__(self, consumer: OrderlyHost) -> None:
        self.consumer = consumer
        self.clock = consumer.instance.clock
        self.suspend_s = consumer.config.suspend_current_queue_time_ms / 1000

    @property
    def clustering(self) -> bool:
        return self.consumer.config.message_model is MessageModel.CLUSTERING

    def _mq_set_body(self, mqs: Sequence[MessageQueue]) -> bytes:
        """LockBatchRequestBody / UnlockBatchRequestBody."""
        c = self.consumer
        return json_body.dumps(
            {
                "consumerGroup": c.group,
                "clientId": c.client_id,
                "mqSet": [mq.to_json() for mq in mqs],
            }
        )

    # ------------------------------------------------------------------ broker locks

    async def _lock_request(
        self, broker_name: str, mqs: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        instance = self.consumer.instance
        addr = instance.master_addr(broker_name)
        if addr is None:
            return set()
        try:
            resp = await instance.invoke(
                addr, RequestCode.LOCK_BATCH_MQ, {}, self._mq_set_body(mqs)
            )
            data: Any = json_body.loads(resp.body)
            return {MessageQueue.from_json(q) for q in data.get("lockOKMQSet") or []}
        except (BrokerError, ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot lock %d queue(s) on %s: %s", len(mqs), broker_name, exc)
        except Exception as exc:  # a malformed answer counts as nothing locked
            log.warning("bad lock answer from %s: %s", broker_name, exc)
        return set()

    def _mark(self, mqs: Sequence[MessageQueue], locked: set[MessageQueue]) -> None:
        """Record a lock answer on the queues still held: locked ones are renewed from now."""
        now = lock_time_ms(self.clock)
        for mq in mqs:
            pq = self.consumer.process_queues.get(mq)
            if pq is not None:
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_ms = now

    async def lock(self, mq: MessageQueue) -> bool:
        locked = await self._lock_request(mq.broker_name, [mq])
        self._mark([mq], locked)
        return mq in locked

    async def lock_all(self) -> None:
        for broker, mqs in _by_broker(self.consumer.process_queues).items():
            self._mark(mqs, await self._lock_request(broker, mqs))

    async def unlock(self, mqs: Sequence[MessageQueue]) -> None:
        instance = self.consumer.instance
        for broker, queues in _by_broker(mqs).items():
            addr = instance.master_addr(broker)
            if addr is None:
                continue
            with contextlib.suppress(BrokerError, ConnectionError, TimeoutError):
                await instance.invoke(
                    addr, RequestCode.UNLOCK_BATCH_MQ, {}, self._mq_set_body(queues)
                )

    async def lock_loop(self) -> None:
        while True:
            await asyncio.sleep(LOCK_INTERVAL_S)
            try:
                await self.lock_all()
            except Exception:
                log.exception("renewing the queue locks of %s failed", self.consumer.group)

    # ------------------------------------------------------------------ rebalance hooks

    async def may_take(self, mq: MessageQueue) -> bool:
        if not self.clustering:
            return True
        locked = mq in await self._lock_request(mq.broker_name, [mq])
        if not locked:
            log.info("%s: %s is locked by another client, not taken", self.consumer.group, mq)
        return locked

    def start_queue(self, pq: ProcessQueue) -> None:
        if self.clustering:
            pq.locked = True  # may_take locked it just now
            pq.last_lock_ms = lock_time_ms(self.clock)
        pq.consume_task = asyncio.create_task(self._consume_loop(pq))
        self.consumer.track(pq.consume_task)

    async def released(self, pq: ProcessQueue) -> None:
        """Let the batch in the listener finish (briefly), so its offset is committed before
        the queue is unlocked for another client."""
        task = pq.consume_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=RELEASE_WAIT_S)

    # ------------------------------------------------------------------ consuming

    async def _consume_loop(self, pq: ProcessQueue) -> None:
        c = self.consumer
        while not pq.dropped and c.running:
            if self.clustering and not lock_valid(pq, self.clock):
                if not await self.lock(pq.mq):
                    await asyncio.sleep(RELOCK_DELAY_S)
                continue
            pq.arrived.clear()
            batch = pq.take(c.config.consume_batch_max_size)
            if not batch:
                await pq.arrived.wait()
                continue
            status = await c.run_listener(pq, batch)
            if pq.dropped:
                return  # not committed: the next owner consumes the batch again, in order
            if is_success(status) or await self._dead_letter(pq, batch):
                offset = pq.commit()
                if offset >= 0:
                    c.offset_store.update(pq.mq, offset, increase_only=False)
                continue
            for m in batch:
                m.reconsume_times += 1
            pq.rollback()
            await asyncio.sleep(self.suspend_s)

    async def _dead_letter(self, pq: ProcessQueue, batch: list[MessageExt]) -> bool:
        """After a failure: True if every message of the batch is past the maximum and went to
        the dead letter queue (so the queue moves on); False to consume the batch again."""
        limit = self.consumer.config.max_reconsume_times
        if limit < 0 or any(m.reconsume_times < limit for m in batch):
            return False
        for m in batch:
            if not await self.consumer.send_to_retry_topic(m, m.reconsume_times):
                return False
        return True


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    grouped: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        grouped.setdefault(mq.broker_name, []).append(mq)
    return grouped
