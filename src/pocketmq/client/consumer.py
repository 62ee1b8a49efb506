"""Consumers: the rebalancing base shared by both kinds, and the PushConsumer.

Rebalance (RebalanceImpl), every ``rebalance_interval_s`` (20 s) and at once when a broker says
the group changed: per subscribed topic, sort the topic's readable queues and the group's client
ids, and keep the queues the allocation strategy gives this client (clustering), or every queue
(broadcasting). A new queue starts where the offset store says, else per ``consume_from_where``;
a queue given away has its offset persisted first.

Each held queue has a ProcessQueue and a pull task that long-polls its broker and hands what it
finds to the consumer; in-flight messages are kept by offset, so the committed offset is always
the lowest message not yet consumed (at-least-once: a crash re-delivers, never skips).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.client.ids import client_id, default_instance_name
from pocketmq.client.instance import ClientInstance
from pocketmq.client.offset_store import (
    LocalOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    default_local_offset_dir,
)
from pocketmq.client.orderly import OrderlyService
from pocketmq.client.producer import Message, Producer, check_topic
from pocketmq.client.pull import PullStatus, Subscription, pull
from pocketmq.client.route import AllocateStrategy, MessageQueue, TopicRoute, allocate_averagely
from pocketmq.errors import BrokerError, ClientError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


class ProcessQueue:
    """The messages of one queue pulled and not yet consumed, by offset."""

    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset  # the next offset to pull
        # Pulls append in offset order and removals keep it: the first key is the lowest.
        self.msgs: dict[int, MessageExt] = {}
        self.size_bytes = 0
        self.max_offset = -1
        self.dropped = False
        self.space = asyncio.Event()
        self.space.set()
        self.task: asyncio.Task[None] | None = None
        # Orderly consumption: the broker lock, the batch being consumed, new-message signal.
        self.locked = False
        self.last_lock_ms = 0.0
        self.taken: dict[int, MessageExt] = {}
        self.arrived = asyncio.Event()
        self.consume_task: asyncio.Task[None] | None = None

    def put(self, msgs: Iterable[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset not in self.msgs:
                self.msgs[m.queue_offset] = m
                self.size_bytes += len(m.body)
                self.max_offset = max(self.max_offset, m.queue_offset)

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit (-1: nothing held)."""
        if not self.msgs:
            return -1
        for m in msgs:
            if self.msgs.pop(m.queue_offset, None) is not None:
                self.size_bytes -= len(m.body)
        self.space.set()
        return next(iter(self.msgs)) if self.msgs else self.max_offset + 1

    def drop(self) -> None:
        self.dropped = True
        self.space.set()
        self.arrived.set()
        if self.task is not None:
            self.task.cancel()

    def take(self, count: int) -> list[MessageExt]:
        """Orderly: the next ``count`` messages in offset order, held until commit/rollback."""
        batch = []
        for offset in list(itertools.islice(self.msgs, count)):
            m = self.msgs.pop(offset)
            self.taken[offset] = m
            batch.append(m)
        return batch

    def commit(self) -> int:
        """Orderly: the taken batch is consumed; returns the offset after it."""
        if not self.taken:
            return -1
        offset = max(self.taken) + 1
        self.size_bytes -= sum(len(m.body) for m in self.taken.values())
        self.taken.clear()
        self.space.set()
        return offset

    def rollback(self) -> None:
        """Orderly: put the taken batch back in front, to be consumed again."""
        self.msgs = {**self.taken, **self.msgs}
        self.taken.clear()


class _RebalancingConsumer(abc.ABC):
    """Subscriptions, rebalance, offsets and pull tasks; subclasses consume what is pulled."""

    consume_type = "CONSUME_PASSIVELY"
    # Push consumers also take their group's retry topic, where failed messages come back.
    consumes_retry_topic = True

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
        allocate: AllocateStrategy,
        pull_batch_size: int,
        pull_threshold_for_queue: int,
        pull_threshold_size_for_queue_mib: int,
        rebalance_interval_s: float,
        persist_interval_s: float,
        broker_suspend_ms: int,
        pull_delay_on_exception_s: float,
        instance_name: str | None,
        local_offset_dir: Path | None,
        instance: ClientInstance | None,
    ) -> None:
        if not group or not group.strip():
            raise ClientError("consumerGroup is blank")
        self.group = group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        # RocketMQ's default for CONSUME_FROM_TIMESTAMP: half an hour ago.
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate = allocate
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_bytes = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.rebalance_interval_s = rebalance_interval_s
        self.persist_interval_s = persist_interval_s
        self.broker_suspend_ms = broker_suspend_ms
        self.pull_delay_on_exception_s = pull_delay_on_exception_s
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(
            namesrv_addr, client_id(instance_name or default_instance_name())
        )
        self.offset_store: OffsetStore
        if message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalOffsetStore(
                local_offset_dir or default_local_offset_dir(), self.instance.client_id, group
            )
        else:
            self.offset_store = RemoteOffsetStore(self.instance, group)
        self.subscriptions: dict[str, Subscription] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._rebalance_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    # ------------------------------------------------------------------ ClientMember

    def topics(self) -> set[str]:
        return set(self.subscriptions)

    def heartbeat_data(self) -> dict[str, Any]:
        return {
            "groupName": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()],
            "unitMode": False,
        }

    def on_route_changed(self, route: TopicRoute) -> None:
        if route.topic in self.subscriptions:
            self.rebalance_soon()

    def rebalance_soon(self) -> None:
        self._rebalance_wake.set()

    def held_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls now (after the last rebalance)."""
        return sorted(self.process_queues)

    # ------------------------------------------------------------------ lifecycle

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Subscribe to a topic's messages whose tag matches ``"*"`` or ``"A || B"``.

        Raises:
            ClientError: a bad topic name or expression.
        """
        check_topic(topic)
        self.subscriptions[topic] = Subscription.parse(topic, expression)
        if self._running:
            self.rebalance_soon()

    async def _start_base(self) -> None:
        if self.message_model is MessageModel.CLUSTERING and self.consumes_retry_topic:
            self.subscriptions.setdefault(
                retry_topic(self.group), Subscription.parse(retry_topic(self.group), "*")
            )
        await self.offset_store.load()
        self.instance.members.append(self)
        self.instance.rebalance_hooks[self.group] = self.rebalance_soon
        await self.instance.start()
        for topic in self.subscriptions:
            try:
                if await self.instance.update_route(topic) is None:
                    # A group's retry topic is created by the heartbeat below: expected.
                    retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                    log.log(logging.DEBUG if retry else logging.WARNING,
                            "the topic %s has no route yet", topic)  # fmt: skip
            except ClientError as exc:
                log.warning("cannot get the route of %s: %s", topic, exc)
        await self.instance.send_heartbeat()
        self._running = True
        self._tasks += [
            asyncio.create_task(self._rebalance_loop()),
            asyncio.create_task(self._persist_loop()),
        ]
        await self.rebalance()

    async def _stop_base(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        for pq in self.process_queues.values():
            pq.drop()
        pending = list(self._tasks) + [
            pq.task for pq in self.process_queues.values() if pq.task is not None
        ]
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    async def _close_base(self) -> None:
        await self.offset_store.persist_all(list(self.process_queues))
        for mq in list(self.process_queues):
            await self._after_release(mq)
        self.process_queues.clear()
        self.instance.rebalance_hooks.pop(self.group, None)
        if self in self.instance.members:
            self.instance.members.remove(self)
        await self.instance.unregister(None, self.group)
        if self._own_instance:
            await self.instance.close()

    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.rebalance_interval_s):
                    await self._rebalance_wake.wait()
            try:
                await self.rebalance()
            except Exception:
                log.exception("rebalance of %s failed", self.group)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_s)
            try:
                await self.offset_store.persist_all(list(self.process_queues))
            except Exception:
                log.exception("persisting the offsets of %s failed", self.group)

    # ------------------------------------------------------------------ rebalance

    async def rebalance(self) -> None:
        self._rebalance_wake.clear()
        for topic in list(self.subscriptions):
            await self._rebalance_topic(topic)
        for mq in [mq for mq in self.process_queues if mq.topic not in self.subscriptions]:
            await self._release(mq)

    async def _rebalance_topic(self, topic: str) -> None:
        route = self.instance.routes.get(topic)
        if route is None:
            route = await self._try_update_route(topic)
        if route is None or not route.read_queues:
            log.debug("rebalance of %s: topic %s has no route", self.group, topic)
            return
        mq_all = sorted(route.read_queues)
        if self.message_model is MessageModel.BROADCASTING:
            mine = set(mq_all)
        else:
            cid_all = await self._consumer_ids(route)
            if not cid_all:
                return
            mine = set(self.allocate(self.group, self.client_id, mq_all, sorted(cid_all)))
        for mq in [mq for mq in self.process_queues if mq.topic == topic and mq not in mine]:
            await self._release(mq)
        for mq in sorted(mine - set(self.process_queues)):
            await self._take(mq)

    async def _try_update_route(self, topic: str) -> TopicRoute | None:
        try:
            return await self.instance.update_route(topic)
        except ClientError as exc:
            log.warning("cannot get the route of %s: %s", topic, exc)
            return None

    async def _consumer_ids(self, route: TopicRoute) -> list[str]:
        """The group's client ids, from one of the topic's brokers (any of them knows)."""
        for name in sorted(route.broker_addrs):
            addr = route.master(name)
            if addr is None:
                continue
            try:
                resp = await self.instance.invoke(
                    addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}
                )
                ids = json_body.loads(resp.body).get("consumerIdList") or []
                return [str(i) for i in ids]
            except (BrokerError, ConnectionError, TimeoutError, ClientError) as exc:
                log.info("no consumer list of %s from %s: %s", self.group, addr, exc)
            except Exception as exc:  # a malformed body from that broker: try another
                log.warning("bad consumer list of %s from %s: %s", self.group, addr, exc)
        return []

    async def _release(self, mq: MessageQueue) -> None:
        pq = self.process_queues.pop(mq, None)
        if pq is None:
            return
        pq.drop()
        await self._released(pq)
        await self.offset_store.persist_all([mq])
        self.offset_store.remove(mq)
        await self._after_release(mq)
        log.info("%s released %s", self.client_id, mq)

    async def _may_take(self, mq: MessageQueue) -> bool:
        """Whether this client may start on a queue just allocated to it."""
        return True

    async def _released(self, pq: ProcessQueue) -> None:
        """A queue was dropped; its last offsets are persisted right after this."""
        return None

    async def _after_release(self, mq: MessageQueue) -> None:
        """A queue's offset is persisted and it belongs to nobody here any more."""
        return None

    def _queue_started(self, pq: ProcessQueue) -> None:
        """A queue is held and its pulls are starting."""
        return None

    async def _take(self, mq: MessageQueue) -> None:
        if not await self._may_take(mq):
            return
        self.offset_store.remove(mq)  # whatever was kept for it before is stale
        try:
            offset = await self.compute_pull_from_where(mq)
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot compute where to pull %s from: %s", mq, exc)
            return
        pq = ProcessQueue(mq, offset)
        self.process_queues[mq] = pq
        pq.task = asyncio.create_task(self._pull_loop(pq))
        self._queue_started(pq)
        log.info("%s took %s from offset %d", self.client_id, mq, offset)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset, else the start or the end or the offset at a time.

        Raises:
            ClientError, ConnectionError, TimeoutError: the broker cannot be asked.
        """
        last = await self.offset_store.read_from_store(mq)
        if last >= 0:
            return last
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        cfw = self.consume_from_where
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            ts = self.consume_timestamp_ms
            if ts is None:
                ts = int(time.time() * 1000) - 30 * 60 * 1000
            return await self._queue_offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ts)
        return await self._queue_offset(mq, RequestCode.GET_MAX_OFFSET)

    async def _queue_offset(self, mq: MessageQueue, code: int, timestamp: int = 0) -> int:
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        fields: dict[str, Any] = {"topic": mq.topic, "queueId": mq.queue_id}
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            fields["timestamp"] = timestamp
        resp = await self.instance.invoke(addr, code, fields)
        return int(resp.ext_fields["offset"])

    # ------------------------------------------------------------------ pulling

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        while not pq.dropped:
            if (
                len(pq.msgs) >= self.pull_threshold_for_queue
                or pq.size_bytes >= self.pull_threshold_size_bytes
            ):
                pq.space.clear()  # flow control: the consumer frees space as it acknowledges
                await pq.space.wait()
                continue
            sub = self.subscriptions.get(mq.topic)
            addr = self.instance.master_addr(mq.broker_name)
            if sub is None or addr is None:
                await asyncio.sleep(self.pull_delay_on_exception_s)
                continue
            commit = (
                self.offset_store.offsets.get(mq, -1)
                if self.message_model is MessageModel.CLUSTERING
                else -1
            )
            try:
                result = await pull(
                    self.instance, addr, self.group, mq, sub, pq.next_offset,
                    self.pull_batch_size, commit_offset=commit,
                    suspend_ms=self.broker_suspend_ms,
                    timeout_s=self.broker_suspend_ms / 1000 + 15,
                )  # fmt: skip
            except (ClientError, ConnectionError, TimeoutError) as exc:
                log.info("pull of %s failed: %s", mq, exc)
                if isinstance(exc, BrokerError) and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    await self._try_update_route(mq.topic)
                await asyncio.sleep(self.pull_delay_on_exception_s)
                continue
            if pq.dropped:
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                # The offset left the queue (retention, or a reset): continue where the broker
                # says, and make that the committed offset right away.
                log.warning("%s: offset %d is illegal, continuing at %d",
                            mq, pq.next_offset, result.next_begin_offset)  # fmt: skip
                pq.next_offset = result.next_begin_offset
                self.offset_store.update(mq, result.next_begin_offset, increase_only=False)
                await self.offset_store.persist_all([mq])
                continue
            pq.next_offset = result.next_begin_offset
            if result.messages:
                pq.put(result.messages)
                self.on_pulled(pq, result.messages)
            elif not pq.msgs:
                # Nothing held and nothing matched: the filtered-out messages count as consumed.
                self.offset_store.update(mq, result.next_begin_offset, increase_only=True)

    @abc.abstractmethod
    def on_pulled(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Take messages just pulled (already in pq.msgs) for consumption."""


@dataclass(slots=True)
class ConsumeContext:
    """What a listener may read and set about the batch it consumes.

    ``ack_index``: on success, messages after this index are still treated as failed (sent
    back for a retry); ``delay_level``: the delay level of those retries (0: the broker's
    choice, RocketMQ's 3 + times already retried).
    """

    message_queue: MessageQueue
    ack_index: int
    delay_level: int = 0


Listener = Callable[
    [list[MessageExt], ConsumeContext], "ConsumeResult | Awaitable[ConsumeResult | None] | None"
]


def _is_async(listener: Listener) -> bool:
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - an object with async __call__
    )


class PushConsumer(_RebalancingConsumer):
    """Calls a listener with the messages of the queues this client holds, up to
    ``consume_concurrency`` batches at once. An ``async def`` listener runs on the event loop;
    a plain function runs in a thread pool of that size, as RocketMQ's consume threads.

    A batch the listener fails (RECONSUME_LATER, an exception, None) is sent back to the broker
    for a later retry (clustering), or dropped with a warning (broadcasting), as RocketMQ does.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str] = "127.0.0.1:9876",
        *,
        listener: Listener | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate: AllocateStrategy = allocate_averagely,
        consume_concurrency: int = 20,
        consume_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        max_reconsume_times: int = -1,
        rebalance_interval_s: float = 20.0,
        persist_interval_s: float = 5.0,
        broker_suspend_ms: int = 15000,
        pull_delay_on_exception_s: float = 3.0,
        resubmit_delay_s: float = 5.0,
        await_termination_s: float = 5.0,
        consume_timeout_min: float = 15.0,
        orderly: bool = False,
        suspend_current_queue_time_ms: int = 1000,
        instance_name: str | None = None,
        local_offset_dir: Path | None = None,
        instance: ClientInstance | None = None,
    ) -> None:
        super().__init__(
            group, namesrv_addr, message_model=message_model,
            consume_from_where=consume_from_where, consume_timestamp_ms=consume_timestamp_ms,
            allocate=allocate, pull_batch_size=pull_batch_size,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib,
            rebalance_interval_s=rebalance_interval_s, persist_interval_s=persist_interval_s,
            broker_suspend_ms=broker_suspend_ms,
            pull_delay_on_exception_s=pull_delay_on_exception_s, instance_name=instance_name,
            local_offset_dir=local_offset_dir, instance=instance,
        )  # fmt: skip
        if consume_concurrency < 1 or consume_batch_max_size < 1:
            raise ClientError("consume_concurrency and consume_batch_max_size must be >= 1")
        self.listener = listener
        self.consume_concurrency = consume_concurrency
        self.consume_batch_max_size = consume_batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self.resubmit_delay_s = resubmit_delay_s
        self.await_termination_s = await_termination_s
        self._sem = asyncio.Semaphore(consume_concurrency)
        self._consuming: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._retry_producer: Producer | None = None
        self.consume_timeout_s = consume_timeout_min * 60
        self.orderly = OrderlyService(self, suspend_current_queue_time_ms) if orderly else None

    def register_listener(self, listener: Listener) -> None:
        self.listener = listener

    async def start(self) -> None:
        """Raises: ClientError: no listener or no subscription."""
        if self._running:
            return
        if self.listener is None:
            raise ClientError("messageListener is null")
        if not self.subscriptions:
            raise ClientError("no subscription: call subscribe(topic, expression) first")
        if not _is_async(self.listener):
            self._executor = ThreadPoolExecutor(
                self.consume_concurrency, thread_name_prefix=f"consume-{self.group}"
            )
        if self.message_model is MessageModel.CLUSTERING:
            self._retry_producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
            await self._retry_producer.start()
        await self._start_base()
        if self.orderly is not None and self.message_model is MessageModel.CLUSTERING:
            self._tasks.append(asyncio.create_task(self.orderly.lock_loop()))

    async def shutdown(self) -> None:
        if not self._running:
            return
        await self._stop_base()
        if self._consuming:
            await asyncio.wait(set(self._consuming), timeout=self.await_termination_s)
        for task in list(self._consuming):
            task.cancel()
        if self._retry_producer is not None:
            await self._retry_producer.shutdown()
        await self._close_base()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def max_reconsume(self) -> int:
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times

    @property
    def running(self) -> bool:
        return self._running

    def track(self, task: asyncio.Task[None]) -> None:
        """Keep a consume task until it ends, so that shutdown can wait for it."""
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)

    # ------------------------------------------------------------------ rebalance hooks

    async def _may_take(self, mq: MessageQueue) -> bool:
        return True if self.orderly is None else await self.orderly.may_take(mq)

    def _queue_started(self, pq: ProcessQueue) -> None:
        if self.orderly is not None:
            self.orderly.start_queue(pq)

    async def _released(self, pq: ProcessQueue) -> None:
        if self.orderly is not None:
            await self.orderly.released(pq)

    async def _after_release(self, mq: MessageQueue) -> None:
        if self.orderly is not None and self.message_model is MessageModel.CLUSTERING:
            await self.orderly.unlock([mq])

    # ------------------------------------------------------------------ consuming

    def on_pulled(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self.orderly is not None:
            pq.arrived.set()
            return
        size = self.consume_batch_max_size
        for i in range(0, len(msgs), size):
            self._submit(pq, msgs[i : i + size])

    def _submit(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        self.track(asyncio.create_task(self._consume(pq, batch)))

    async def _call_listener(self, batch: list[MessageExt], ctx: ConsumeContext) -> Any:
        assert self.listener is not None
        if self._executor is None:
            return await self.listener(batch, ctx)  # type: ignore[misc]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.listener, batch, ctx)

    async def run_listener(
        self, pq: ProcessQueue, batch: list[MessageExt], ctx: ConsumeContext | None = None
    ) -> Any:
        """The listener's answer for a batch; None if it raised or ran past the consume
        timeout (an async listener is cancelled then; a thread's result is ignored)."""
        start_ms = str(int(time.time() * 1000))
        for m in batch:
            m.properties[MessageConst.CONSUME_START_TIMESTAMP] = start_ms
        try:
            async with asyncio.timeout(self.consume_timeout_s):
                return await self._call_listener(
                    batch, ctx or ConsumeContext(pq.mq, ack_index=len(batch) - 1)
                )
        except TimeoutError:
            log.warning("the listener of %s took over %.0f s on %s: counted as failed",
                        self.group, self.consume_timeout_s, pq.mq)  # fmt: skip
        except Exception:
            log.exception("the listener of %s failed on %s", self.group, pq.mq)
        return None

    async def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        async with self._sem:
            if pq.dropped or not self._running:
                return
            ctx = ConsumeContext(pq.mq, ack_index=len(batch) - 1)
            status = await self.run_listener(pq, batch, ctx)
        if not isinstance(status, ConsumeResult):
            status = ConsumeResult.RECONSUME_LATER
        if pq.dropped:
            return  # the queue moved to another consumer, which consumes these again
        ack = ctx.ack_index if status is ConsumeResult.CONSUME_SUCCESS else -1
        failed = batch[max(ack + 1, 0) :]
        unsent: list[MessageExt] = []
        if failed and self.message_model is MessageModel.BROADCASTING:
            log.warning("broadcast consume of %d message(s) failed, dropped", len(failed))
        elif failed:
            for m in failed:
                if not await self._send_back(pq.mq, m, ctx.delay_level):
                    m.reconsume_times += 1
                    unsent.append(m)
        offset = pq.remove([m for m in batch if all(m is not u for u in unsent)])
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(pq.mq, offset, increase_only=True)
        if unsent:
            # Neither the broker nor a direct send took them: consume them here again later.
            asyncio.get_running_loop().call_later(self.resubmit_delay_s, self._resubmit, pq, unsent)

    def _resubmit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._running and not pq.dropped:
            self._submit(pq, msgs)

    async def _send_back(self, mq: MessageQueue, m: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK, or failing that a direct send to the retry topic."""
        addr = self.instance.master_addr(mq.broker_name)
        try:
            if addr is None:
                raise ClientError(f"The broker[{mq.broker_name}] not exist")
            await self.instance.invoke(
                addr,
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {
                    "offset": m.phy_offset,
                    "group": self.group,
                    "delayLevel": delay_level,
                    "originMsgId": m.msg_id,
                    "originTopic": m.topic,
                    "unitMode": False,
                    "maxReconsumeTimes": self.max_reconsume,
                },
            )
            return True
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.info("send back of %s to %s failed (%s), sending it to the retry topic",
                     m.msg_id, addr, exc)  # fmt: skip
        return await self.send_to_retry_topic(m, m.reconsume_times + 1)

    async def send_to_retry_topic(self, m: MessageExt, reconsume_times: int) -> bool:
        """Send a copy to the group's retry topic through the inner producer; the broker moves
        it to the dead letter queue when past the maximum or when the group is ordered."""
        if self._retry_producer is None:
            return False
        props = dict(m.properties)
        props[MessageConst.ORIGIN_MESSAGE_ID] = props.get(MessageConst.ORIGIN_MESSAGE_ID, m.msg_id)
        props[MessageConst.RETRY_TOPIC] = m.topic
        props[MessageConst.RECONSUME_TIME] = str(reconsume_times)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(self.max_reconsume)
        props[MessageConst.DELAY_TIME_LEVEL] = str(3 + m.reconsume_times)
        props.pop(MessageConst.CONSUME_START_TIMESTAMP, None)
        try:
            await self._retry_producer.send(Message(retry_topic(self.group), m.body, m.flag, props))
            return True
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot send %s to the retry topic: %s", m.msg_id, exc)
            return False
