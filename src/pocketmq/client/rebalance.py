"""RebalancingConsumer: what the push and the lite pull consumer share (RebalanceImpl with the
pull side of DefaultMQPushConsumerImpl): subscriptions, rebalance, where a new queue starts, and
the pull task of each held queue. Subclasses decide what happens to the messages pulled.

Rebalance, every ``rebalance_interval_s`` (20 s) and at once when a broker says the group
changed: per subscribed topic, sort the topic's readable queues and the group's client ids, and
keep the queues the allocation strategy gives this client (clustering), or every queue
(broadcasting). A new queue starts where the offset store says, else per ``consume_from_where``;
a queue given away has its offset persisted first.

Each held queue has a ProcessQueue and a pull task that long-polls its broker and hands what it
finds to the consumer, pausing while the queue holds more than its flow-control thresholds.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from typing import Any, Self

from pocketmq.client.admin_requests import AdminRequests
from pocketmq.client.consumer_config import (
    DEFAULT_CONSUME_BACK_MS,
    ConsumeFromWhere,
    ConsumerConfig,
    MessageModel,
)
from pocketmq.client.instance import ClientInstance, new_client_instance
from pocketmq.client.offset_store import (
    LocalOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    default_local_offset_dir,
)
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.producer import check_topic
from pocketmq.client.pull import MessageSelector, PullStatus, Subscription, pull, pull_fields
from pocketmq.client.route import MessageQueue, TopicRoute, find_broker_in_subscribe
from pocketmq.errors import BrokerError, ClientError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.names import MASTER_ID, is_retry_topic, retry_topic

log = logging.getLogger(__name__)


class RebalancingConsumer(abc.ABC):
    """Subscriptions, rebalance, offsets and pull tasks; subclasses consume what is pulled."""

    consume_type = "CONSUME_PASSIVELY"
    # Push consumers also take their group's retry topic, where failed messages come back.
    consumes_retry_topic = True

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        config: ConsumerConfig,
        instance: ClientInstance | None,
    ) -> None:
        if not group or not group.strip():
            raise ClientError("consumerGroup is blank")
        self.group = group
        self.config = config
        self._own_instance = instance is None
        self.instance = instance or new_client_instance(
            namesrv_addr, config.instance_name, config.credentials
        )
        self.offset_store: OffsetStore
        if config.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalOffsetStore(
                config.local_offset_dir or default_local_offset_dir(),
                self.instance.client_id,
                group,
            )
        else:
            self.offset_store = RemoteOffsetStore(self.instance, group)
        self.subscriptions: dict[str, Subscription] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        # The broker id each queue's last pull answer suggested (suggestWhichBrokerId): the
        # next pull goes there when the route has it.
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self._rebalance_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self.start_timestamp_ms = 0  # when the consumer last started, on the client clock

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
            "messageModel": self.config.message_model.value,
            "consumeFromWhere": self.config.consume_from_where.value,
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

    @abc.abstractmethod
    async def start(self) -> None:
        """Start pulling (and consuming) the subscribed topics."""

    @abc.abstractmethod
    async def shutdown(self) -> None:
        """Stop, commit what was consumed and leave the group."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe to a topic's messages whose tag matches ``"*"`` or ``"A || B"``, or
        those a ``MessageSelector.by_sql("a > 5")`` selects by their properties.

        Raises:
            ClientError: a bad topic name or expression.
        """
        check_topic(topic)
        self.subscriptions[topic] = Subscription.parse(topic, expression)
        if self._running:
            self.rebalance_soon()

    async def _start_base(self) -> None:
        if self.config.message_model is MessageModel.CLUSTERING and self.consumes_retry_topic:
            self.subscriptions.setdefault(
                retry_topic(self.group), Subscription.parse(retry_topic(self.group), "*")
            )
        await self.offset_store.load()
        # Offset resets, running info and consume-directly, passed on from admin tools.
        AdminRequests(self.instance).register()
        self.instance.members.append(self)
        self.instance.rebalance_hooks[self.group] = self.rebalance_soon
        await self.instance.start()
        for topic in self.subscriptions:
            try:
                if await self.instance.update_route(topic) is None:
                    # A group's retry topic is created by the heartbeat below: expected.
                    log.log(logging.DEBUG if is_retry_topic(topic) else logging.WARNING,
                            "the topic %s has no route yet", topic)  # fmt: skip
            except ClientError as exc:
                log.warning("cannot get the route of %s: %s", topic, exc)
        await self.instance.send_heartbeat()
        self._running = True
        self.start_timestamp_ms = self.instance.clock.now_ms()
        self._tasks += [
            asyncio.create_task(self._rebalance_loop()),
            asyncio.create_task(self._persist_loop()),
        ]
        await self.rebalance()

    async def _check_client_config(self) -> None:
        """Ask a broker of each topic subscribed by SQL92 whether it serves the selector
        (CHECK_CLIENT_CONFIG), as the Java client does at start; a topic without a route yet
        is not checked. On a refusal an instance of the consumer's own is closed.

        Raises:
            BrokerError: the broker refuses it (SUBSCRIPTION_PARSE_FAILED with the reason, or
                SYSTEM_ERROR when it does not filter by properties).
        """
        try:
            for sub in self.subscriptions.values():
                addr = None if sub.is_tag else await self._any_broker(sub.topic)
                if addr is None:
                    continue
                body = {"clientId": self.client_id, "group": self.group,
                        "subscriptionData": sub.to_json()}  # fmt: skip
                await self.instance.invoke(
                    addr, RequestCode.CHECK_CLIENT_CONFIG, {}, json_body.dumps(body)
                )
        except BaseException:
            if self._own_instance:
                await self.instance.close()
            raise

    async def _any_broker(self, topic: str) -> str | None:
        try:
            route = self.instance.routes.get(topic) or await self.instance.update_route(topic)
        except ClientError as exc:
            log.warning("cannot get the route of %s: %s", topic, exc)
            return None
        addrs = [route.any_broker(name) for name in sorted(route.broker_addrs)] if route else []
        return next((a for a in addrs if a), None)

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
                async with asyncio.timeout(self.config.rebalance_interval_s):
                    await self._rebalance_wake.wait()
            try:
                await self.rebalance()
            except Exception:
                log.exception("rebalance of %s failed", self.group)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.persist_interval_s)
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
        if self.config.message_model is MessageModel.BROADCASTING:
            mine = set(mq_all)
        else:
            cid_all = await self._consumer_ids(route)
            if not cid_all:
                return
            mine = set(self.config.allocate(self.group, self.client_id, mq_all, sorted(cid_all)))
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
            addr = route.any_broker(name)
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
        self._start_pulling(mq, offset)
        log.info("%s took %s from offset %d", self.client_id, mq, offset)

    def _start_pulling(self, mq: MessageQueue, offset: int) -> None:
        pq = ProcessQueue(mq, offset)
        self.process_queues[mq] = pq
        pq.task = asyncio.create_task(self._pull_loop(pq))
        self._queue_started(pq)

    async def reset_offset(self, mq: MessageQueue, offset: int) -> None:
        """Consume a held queue from ``offset`` on: what it holds unconsumed is dropped and its
        pulls restart there (a seek, or a broker's RESET_CONSUMER_CLIENT_OFFSET).

        Raises:
            ClientError: mq is not held by this consumer.
        """
        old = self.process_queues.get(mq)
        if old is None:
            raise ClientError(f"The message queue is not in assigned list, message queue: {mq}")
        old.drop()
        await self._released(old)
        self.offset_store.update(mq, offset, increase_only=False)
        self._start_pulling(mq, offset)

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker's RESET_CONSUMER_CLIENT_OFFSET: each queue of ``topic`` this consumer holds
        restarts at its offset in ``offsets``, persisted at once (queues held by other members
        of the group are theirs to move)."""
        moved = [mq for mq in self.held_queues() if mq.topic == topic and mq in offsets]
        for mq in moved:
            await self.reset_offset(mq, offsets[mq])
        await self.offset_store.persist_all(moved)
        log.info("%s reset %s to %s", self.group, topic, {mq.queue_id: offsets[mq] for mq in moved})

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset, else the start or the end or the offset at a time.

        Raises:
            ClientError, ConnectionError, TimeoutError: the broker cannot be asked.
        """
        last = await self.offset_store.read_from_store(mq)
        if last >= 0:
            return last
        if is_retry_topic(mq.topic):
            return 0
        cfw = self.config.consume_from_where
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            ts = self.config.consume_timestamp_ms
            if ts is None:
                ts = self.instance.clock.now_ms() - DEFAULT_CONSUME_BACK_MS
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
        instance, offset_store = self.instance, self.offset_store
        # The request fields that stay the same while the subscription and the batch size do
        # (pull_fields), and what they were built for.
        fields_of: tuple[Subscription, int] | None = None
        fields: dict[str, str] = {}
        while not pq.dropped:
            cfg = self.config
            if pq.is_full(cfg.pull_threshold_for_queue, cfg.pull_threshold_size_bytes):
                await pq.wait_for_space()  # the consumer frees space as it acknowledges
                continue
            sub = self.subscriptions.get(mq.topic)
            node = self.pull_from_which_node.get(mq, MASTER_ID)
            # The routes known already answer nearly every pull without a coroutine.
            broker = find_broker_in_subscribe(
                instance.broker_addrs.get(mq.broker_name, {}), node, False
            )
            if broker is None:
                try:
                    broker = await instance.find_broker_in_subscribe(
                        mq.topic, mq.broker_name, node, False
                    )
                except ClientError as exc:
                    log.info("no broker to pull %s from: %s", mq, exc)
            if sub is None or broker is None:
                await asyncio.sleep(cfg.pull_delay_on_exception_s)
                continue
            if fields_of is None or fields_of[0] is not sub or fields_of[1] != cfg.pull_batch_size:
                fields_of = (sub, cfg.pull_batch_size)
                fields = pull_fields(self.group, mq, sub, cfg.pull_batch_size)
            # A slave keeps no offset a pull carries, so none is sent to it (PullAPIWrapper).
            commit = (
                offset_store.offsets.get(mq, -1)
                if cfg.message_model is MessageModel.CLUSTERING and not broker.slave
                else -1
            )
            try:
                result = await pull(
                    instance, broker.addr, self.group, mq, sub, pq.next_offset,
                    cfg.pull_batch_size, commit_offset=commit,
                    suspend_ms=cfg.broker_suspend_ms,
                    timeout_s=cfg.broker_suspend_ms / 1000 + 15, fields=fields,
                )  # fmt: skip
            except (ClientError, ConnectionError, TimeoutError) as exc:
                log.info("pull of %s failed: %s", mq, exc)
                if isinstance(exc, BrokerError) and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    await self._try_update_route(mq.topic)
                await asyncio.sleep(cfg.pull_delay_on_exception_s)
                continue
            if pq.dropped:
                return
            if result.suggest_which_broker_id != node:
                self.pull_from_which_node[mq] = result.suggest_which_broker_id
            if result.status is PullStatus.OFFSET_ILLEGAL:
                # The offset left the queue (retention, or a reset): continue where the broker
                # says, and make that the committed offset right away.
                log.warning("%s: offset %d is illegal, continuing at %d",
                            mq, pq.next_offset, result.next_begin_offset)  # fmt: skip
                pq.next_offset = result.next_begin_offset
                offset_store.update(mq, result.next_begin_offset, increase_only=False)
                await offset_store.persist_all([mq])
                continue
            pq.next_offset = result.next_begin_offset
            if result.messages:
                pq.put(result.messages)
                self.on_pulled(pq, result.messages)
                if len(result.messages) < cfg.pull_batch_size:
                    # The queue is drained and the broker will hold the next pull anyway: what
                    # on_pulled started (the listener's task, a waiting poll) runs before that
                    # request's write instead of after it (BENCHMARKS.md, "Consumers first").
                    # A full batch says more is waiting: the next pull goes out first.
                    await asyncio.sleep(0)
            elif not pq.msgs:
                # Nothing held and nothing matched: the filtered-out messages count as consumed.
                offset_store.update(mq, result.next_begin_offset, increase_only=True)

    @abc.abstractmethod
    def on_pulled(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Take messages just pulled (already in pq.msgs) for consumption."""
