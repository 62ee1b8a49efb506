"""The protocol-neutral messaging service: every RocketMQ rule a client request meets, written
once, under both edges. Remoting handlers (``broker/handlers/``) and the gRPC servicer
(``grpc/``) parse a request, call this service and map the result, as RocketMQ's
proxy hands its gRPC activities to ``MessagingProcessor``.

- Send: topic resolution (auto-creation from ``TBW102``, retry topics), the broker's and the
  topic's permissions, the dead-letter rule of sends to a retry topic, timer and delay-level
  parking, the properties the broker stamps on every message (cluster, region, trace
  switch), then the store; transactional half messages to ``broker/transaction``.
- Pull: group, queue and subscription checks, then the one long-polling loop, released when
  the request's connection closes. A pull filters with the subscription it carries, or with
  the one its group's heartbeats registered (``filtering`` compiles both).
- Retry and dead letters: one implementation for 4.x send-back, direct retry sends and POP
  revives (``redeliver``), with one rule for when a message's retries are spent.
- Offsets, consumer groups and queue locks.
- The role: a slave refuses every write (``check_master``), serves reads, and tells pulls
  which broker to read from next (``pull_answer``).

Refusals are ``RequestError`` values with RocketMQ's remoting code and remark; each edge maps
them to its protocol. Each field's syntax (names, Java int and long ranges, polling times) is
checked by the edges with ``protocol.fields`` before they call; what needs the broker's state
(a queue id against its topic's queues) is checked here, with the same validators.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.filtering import FilterNotSupported, Subscription, compile_subscription
from pocketmq.broker.stats import Protocol
from pocketmq.broker.status_map import (
    FENCED_REFUSAL,
    SLAVE_END_TRANSACTION_REFUSAL,
    SLAVE_REFUSAL,
    pull_answer,
    pull_code,
)
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.broker.transaction import EndTransaction
from pocketmq.broker.transaction import half as tx
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import ANY_QUEUE, check_queue_id
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    FIRST_RETRY_DELAY_LEVEL,
    PERM_READ_WRITE,
    SubscriptionData,
    dlq_topic,
    group_of_retry_topic,
    is_readable,
    is_retry_topic,
    is_system_topic,
    is_writeable,
    retry_topic,
)
from pocketmq.protocol.topic_attributes import message_type_of
from pocketmq.store import GetResult, MessageFilter, PutResult
from pocketmq.store.config import BrokerRole

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.consumers import ConsumerChannel

log = logging.getLogger(__name__)


def retries_spent(reconsume_times: int, max_reconsume_times: int) -> bool:
    """Whether a message that failed after ``reconsume_times`` earlier retries goes to the
    dead-letter queue instead of another retry (it has been delivered reconsume_times + 1
    times; ``max_reconsume_times`` retries are allowed)."""
    return reconsume_times >= max_reconsume_times


@dataclass(frozen=True, slots=True)
class PullQuery:
    """One pull of a queue by offset."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    filter: MessageFilter | None = None


class MessagingService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.store = broker.store
        self.topics = broker.topics
        self.offsets = broker.offsets
        self.groups = broker.subscription_groups
        # The one counting point of the statistics (puts, gets, send-backs), both edges.
        self.stats = broker.stats
        # The broker's region and trace switch, as a send answer and a stored message carry
        # them; with the cluster, what ``stamp`` puts on every message (built once: the
        # config does not change while the broker runs).
        self.region_properties: dict[str, str] = {
            MessageConst.MSG_REGION: self.config.region_id,
            MessageConst.TRACE_SWITCH: "true" if self.config.trace_on else "false",
        }
        self._stamp = {
            MessageConst.CLUSTER: self.config.broker_cluster_name,
            **self.region_properties,
        }

    @property
    def store_host(self) -> tuple[str, int]:
        """The address records stored by this broker carry."""
        return self.store.commitlog.store_host

    # ------------------------------------------------------------------ checks

    @property
    def is_slave(self) -> bool:
        return self.store.role is BrokerRole.SLAVE

    def check_master(
        self, code: int = ResponseCode.SERVICE_NOT_AVAILABLE, remark: str = SLAVE_REFUSAL
    ) -> None:
        """The one rule of a slave: it stores nothing a client sends (its CommitLog is its
        master's copy). Sends (``topic_for_send``), send-backs, revives and transaction ends
        meet it before they change anything; the store refuses any other put. Under failover
        a master whose lease is not confirmed (the fence) refuses the same way.

        Raises:
            RequestError: ``code`` (RocketMQ's SERVICE_NOT_AVAILABLE for what reaches its
                store, SLAVE_NOT_AVAILABLE for END_TRANSACTION) on a slave or a fenced master.
        """
        if self.is_slave:
            raise RequestError(code, remark)
        if not self.store.may_write():
            raise RequestError(code, FENCED_REFUSAL)

    def check_writable(self) -> None:
        self.check_master()
        if not is_writeable(self.config.broker_permission):
            raise RequestError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending message is forbidden",
            )

    def check_readable(self) -> None:
        if not is_readable(self.config.broker_permission):
            raise RequestError(
                ResponseCode.NO_PERMISSION, "the broker pulling message is forbidden"
            )

    def group(self, group: str) -> SubscriptionGroupConfig:
        """The subscription group a request names (created on demand when
        autoCreateSubscriptionGroup is on).

        Raises:
            RequestError: SUBSCRIPTION_GROUP_NOT_EXIST.
        """
        sub = self.groups.find(group)
        if sub is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        return sub

    def consuming_group(self, group: str) -> SubscriptionGroupConfig:
        """The group a pull or a pop reads for: it must exist and have consumeEnable on.

        Raises:
            RequestError: SUBSCRIPTION_GROUP_NOT_EXIST, or NO_PERMISSION (consumeEnable off).
        """
        sub = self.group(group)
        if not sub.consume_enable:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        return sub

    def topic(self, topic: str) -> TopicConfig:
        """Raises: RequestError: TOPIC_NOT_EXIST."""
        cfg = self.topics.get(topic)
        if cfg is None:
            raise RequestError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        return cfg

    def readable_topic(self, topic: str) -> TopicConfig:
        """A topic consumers may read, on a broker they may read from.

        Raises:
            RequestError: NO_PERMISSION or TOPIC_NOT_EXIST.
        """
        self.check_readable()
        cfg = self.topic(topic)
        if not is_readable(cfg.perm):
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        return cfg

    # ------------------------------------------------------------------ send

    def topic_for_send(
        self, topic: str, default_topic: str = AUTO_CREATE_TOPIC_KEY, queue_nums: int = 0
    ) -> TopicConfig:
        """The config of a topic a producer sends to, auto-created from ``default_topic``
        with at most ``queue_nums`` queues (the broker's default when 0) when enabled.

        Raises:
            RequestError: the template topic itself, a missing topic, or no write permission.
        """
        self.check_writable()
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system topic."
            )
        if is_system_topic(topic):
            # Only the broker writes these (TopicValidator.isNotAllowedSendTopic).
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        cfg = self.topics.get(topic)
        if cfg is None and is_retry_topic(topic):
            cfg = self.topics.create_system_if_absent(topic, 1, PERM_READ_WRITE)
        if cfg is None and self.config.auto_create_topic_enable:
            cfg = self.topics.create_in_send(
                topic, default_topic, queue_nums or self.config.default_topic_queue_nums
            )
        if cfg is None:
            raise RequestError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not is_writeable(cfg.perm):
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return cfg

    @staticmethod
    def write_queue(cfg: TopicConfig, queue_id: int) -> int:
        """The queue a send goes to: the one it names, or any (ANY_QUEUE) picked at random.

        Raises:
            RequestError: SYSTEM_ERROR for a queue the topic does not have, as RocketMQ says.
        """
        if queue_id == ANY_QUEUE:
            return random.randrange(cfg.write_queue_nums)
        return check_queue_id(
            queue_id, cfg.write_queue_nums, topic=cfg.topic_name, code=ResponseCode.SYSTEM_ERROR
        )

    async def send(
        self, msg: MessageExt, max_reconsume_times: int | None = None,
        protocol: Protocol = Protocol.REMOTING,
    ) -> PutResult:  # fmt: skip
        """Store one message a producer sent: a send to a retry topic may be dead-lettered
        (past ``max_reconsume_times``, the group's when None, or for an ordered group), timer
        and delay-level messages are parked in their system topics, then the store appends it.
        A stored message counts in its topic's put statistics (the topic it was sent to).

        A transactional half message (PREPARED) goes to the transaction service instead,
        invisible until its producer commits it.

        Raises:
            RequestError: an unknown retry group, a bad timer or delay property, or a half
                the transaction service refuses.
        """
        topic = msg.topic
        # Before the timer and delay rewrites take the properties that make a delay message.
        message_type = message_type_of(msg.properties)
        # A half carries the stamps too: its commit re-puts it as it was sent.
        self.stamp(msg)
        if tx.is_half(msg):
            result = await self.broker.transactions.prepare(msg)
        else:
            tx.make_visible(msg)
            if is_retry_topic(msg.topic):
                group = group_of_retry_topic(msg.topic)
                sub = self.group(group)
                max_times = (
                    sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
                )
                # The client already counted this delivery in the message it sends back.
                spent = retries_spent(msg.reconsume_times - 1, max_times)
                if spent or self.broker.locks.has_live_locks(group):
                    self._to_dead_letter(group, msg)
            self.broker.timer.rewrite(msg)
            self.broker.schedule.rewrite(msg)
            result = await self.store.put_messages([msg])
        if result.ok:
            self.stats.on_put(topic, 1, result.wrote_bytes, protocol, message_type)
        return result

    async def send_batch(self, msgs: list[MessageExt]) -> PutResult:
        """Store a batch as one append (no delays in a batch: the edge refuses them).

        Raises:
            RequestError: MESSAGE_ILLEGAL for a transactional message in the batch, as
                RocketMQ's CommitLog refuses a batch with a transaction type.
        """
        # One pass: a refused batch is never stored, so stamping its first messages is moot.
        for msg in msgs:
            if not tx.is_plain(msg):
                raise RequestError(
                    ResponseCode.MESSAGE_ILLEGAL,
                    "transactional messages cannot be sent in a batch: send each on its own",
                )
            self.stamp(msg)
        result = await self.store.put_messages(msgs)
        if result.ok:
            self.stats.on_put(msgs[0].topic, result.msg_num, result.wrote_bytes,
                              message_type=message_type_of(msgs[0].properties))  # fmt: skip
        return result

    def stamp(self, msg: MessageExt) -> None:
        """The properties RocketMQ's send processor puts on every message a producer sends:
        the broker's cluster (which a request-reply consumer needs to build its reply), its
        region and trace switch (5.x stamps these on each message, 4.x only in the answer)."""
        msg.properties.update(self._stamp)

    async def store_reply(self, msg: MessageExt) -> PutResult | None:
        """Keep a reply message (already pushed to its requester, or not) in the reply topic
        as it was sent, when storeReplyMessageEnable; None when it is not kept."""
        if not self.config.store_reply_message_enable:
            return None
        return self._stored(await self.store.put_messages([msg]))

    def _stored(self, result: PutResult) -> PutResult:
        """A put the broker makes for itself counts in the store's totals only."""
        if result.ok:
            self.stats.on_store(result.msg_num, result.wrote_bytes)
        return result

    async def end_transaction(self, end: EndTransaction) -> None:
        """A producer's commit or rollback of a half message (both edges).

        Raises:
            RequestError: SLAVE_NOT_AVAILABLE on a slave, as EndTransactionProcessor answers;
                the transaction service's refusals.
        """
        self.check_master(ResponseCode.SLAVE_NOT_AVAILABLE, SLAVE_END_TRANSACTION_REFUSAL)
        await self.broker.transactions.end(end)

    # ------------------------------------------------------------------ retry and DLQ

    def _to_dead_letter(self, group: str, msg: MessageExt) -> None:
        """Point ``msg`` at the group's dead-letter queue, created on first use."""
        msg.topic = dlq_topic(group)
        msg.queue_id = 0
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        self.topics.create_system_if_absent(msg.topic, 1, PERM_READ_WRITE)

    async def redeliver(
        self,
        group: str,
        origin: MessageExt,
        *,
        original_topic: str,
        reconsume_times: int,
        retry_to: str | None,
        retry_queue_nums: int = 1,
        delay_level: int = 0,
    ) -> PutResult:
        """Store a message a consumer group did not consume once more: in ``retry_to`` for
        another delivery (after ``delay_level`` when not 0), or in the group's dead-letter
        queue when ``retry_to`` is None. The copy keeps the producer's body and born fields,
        the topic it was first sent to (RETRY_TOPIC) and its first message id
        (ORIGIN_MESSAGE_ID), so a consumer or an audit can tell where it came from.
        """
        self.check_master()
        props = dict(origin.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, original_topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = origin.uniq_key or origin.msg_id
        msg = origin.put_again(origin.topic, 0, props, reconsume_times)
        msg.store_host = self.store_host
        if retry_to is None:
            self._to_dead_letter(group, msg)
        else:
            cfg = self.topics.create_system_if_absent(retry_to, retry_queue_nums, PERM_READ_WRITE)
            msg.topic = retry_to
            msg.queue_id = random.randrange(max(cfg.write_queue_nums, 1))
            if delay_level:
                msg.properties[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
                self.broker.schedule.rewrite(msg)
        return self._stored(await self.store.put_messages([msg]))

    async def send_back(
        self, group: str, phy_offset: int, delay_level: int, max_reconsume_times: int | None
    ) -> PutResult | None:
        """A 4.x consumer failed the message at ``phy_offset``: into the group's retry topic
        at delay level 3 + times retried (or the client's level), or into its DLQ once its
        retries are spent or when the client asks with a negative level. None when the group
        wants no retries.

        Raises:
            RequestError: an unknown group, a read-only broker or an offset with no message.
        """
        sub = self.group(group)
        self.check_writable()
        if sub.retry_queue_nums <= 0:
            return None
        origin = self.store.look_message_by_offset(phy_offset)
        if origin is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {phy_offset}"
            )
        max_times = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
        dead = delay_level < 0 or retries_spent(origin.reconsume_times, max_times)
        result = await self.redeliver(
            group,
            origin,
            original_topic=origin.topic,
            reconsume_times=origin.reconsume_times + 1,
            retry_to=None if dead else retry_topic(group),
            retry_queue_nums=sub.retry_queue_nums,
            delay_level=delay_level or FIRST_RETRY_DELAY_LEVEL + origin.reconsume_times,
        )
        if result.ok:
            # Counted under the topic the message was first sent to, as RocketMQ does.
            topic = origin.properties.get(MessageConst.RETRY_TOPIC) or origin.topic
            self.stats.on_send_back(group, topic)
        return result

    # ------------------------------------------------------------------ subscriptions

    def subscription(self, data: SubscriptionData) -> Subscription:
        """The compiled subscription a request carries (a pull with its subscription, a POP
        receive, CHECK_CLIENT_CONFIG).

        Raises:
            FilterNotSupported: SYSTEM_ERROR for a SQL92 selector when enablePropertyFilter
                is off.
            RequestError: SUBSCRIPTION_PARSE_FAILED, the reason after RocketMQ's remark.
        """
        sub = self._served(compile_subscription(data))
        if sub.error is not None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription failed: {sub.error}",
            )
        return sub

    def _served(self, sub: Subscription) -> Subscription:
        """Raises: FilterNotSupported: a SQL92 subscription while enablePropertyFilter is off."""
        if not sub.is_tag and not self.config.enable_property_filter:
            raise FilterNotSupported(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by "
                + sub.data.expression_type,
            )
        return sub

    def pull_subscription(
        self, group: str, topic: str, queue_id: int, carried: SubscriptionData | None,
        sub_version: int = 0,
    ) -> Subscription:  # fmt: skip
        """What a pull of a queue filters with, after PullMessageProcessor's checks in its
        order: the broker's and the group's read permission, the queue, then the subscription
        the pull carries, or (``carried`` None: no FLAG_SUBSCRIPTION) the one the group's
        heartbeats registered, which must be at least ``sub_version``.

        Raises:
            RequestError: NO_PERMISSION, SUBSCRIPTION_GROUP_NOT_EXIST, TOPIC_NOT_EXIST,
                SYSTEM_ERROR (a queue the topic lacks, or SQL92 while it is off),
                SUBSCRIPTION_PARSE_FAILED, SUBSCRIPTION_NOT_EXIST, SUBSCRIPTION_NOT_LATEST,
                FILTER_DATA_NOT_EXIST.
        """
        self.check_readable()
        sub_group = self.consuming_group(group)
        self.readable_queue(topic, queue_id)
        if carried is not None:
            return self.subscription(carried)
        info = self.broker.consumers.groups.get(group)
        if info is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"
            )
        # Java clients send the MessageModel's name, C++ ones its ordinal (0: BROADCASTING).
        if not sub_group.consume_broadcast_enable and info.message_model in ("BROADCASTING", 0):
            raise RequestError(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{group}] can not consume by broadcast way",
            )
        sub = info.subscriptions.get(topic)
        if sub is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist"
            )
        if sub.sub_version < sub_version:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        if sub.error is not None:
            raise RequestError(
                ResponseCode.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
            )
        return self._served(sub)

    def register_consumer(
        self,
        channel: ConsumerChannel,
        client_id: str,
        consumer: dict[str, Any],
        subscriptions: list[SubscriptionData],
    ) -> None:
        """A heartbeat's ConsumerData: the group's retry topic exists from then on, and its
        subscriptions are kept compiled, a SQL92 selector that does not compile with its
        reason (the pulls relying on it are refused, as RocketMQ refuses them)."""
        group = str(consumer["groupName"])
        self.ensure_retry_topic(group)
        compiled = [compile_subscription(data) for data in subscriptions]
        self.broker.consumers.register(channel, client_id, consumer, compiled)

    # ------------------------------------------------------------------ pull

    def readable_queue(self, topic: str, queue_id: int) -> TopicConfig:
        """Raises: RequestError: see ``readable_topic``; SYSTEM_ERROR for a queue id the topic
        does not have."""
        cfg = self.readable_topic(topic)
        check_queue_id(queue_id, cfg.read_queue_nums, topic=topic, code=ResponseCode.SYSTEM_ERROR)
        return cfg

    async def pull(
        self,
        query: PullQuery,
        hold_ms: int,
        closed: asyncio.Future[None] | None = None,
        commit_offset: int = -1,
        protocol: Protocol = Protocol.REMOTING,
    ) -> GetResult:
        """Up to ``max_nums`` messages of a queue from ``offset``. With nothing to read, the
        pull is held until a message arrives, ``hold_ms`` pass (the edges cap it) or the
        request's connection closes (``closed`` is done). The group's pull position is
        noted, and ``commit_offset`` (when not negative) committed as the group's offset, as a
        4.x pull carries it (on a master only). The answer counts in the group's get
        statistics, with the time its last look at the store took.

        Raises:
            RequestError: see ``readable_queue``.
        """
        self.readable_queue(query.topic, query.queue_id)
        # A slave keeps the offsets its master syncs to it, not those pulls carry.
        if commit_offset >= 0 and not self.is_slave:
            self.offsets.commit(query.group, query.topic, query.queue_id, commit_offset)
        clock = self.broker.clock
        deadline = clock.monotonic() + hold_ms / 1000
        while True:
            looked_ms = clock.now_ms()
            result = self.store.get_message(
                query.topic, query.queue_id, query.offset, query.max_nums, query.filter
            )
            remaining = deadline - clock.monotonic()
            # Only "nothing new yet" waits: messages, or an offset to move to, answer at once.
            found_nothing = pull_code(result.status, query.offset) == ResponseCode.PULL_NOT_FOUND
            if not found_nothing or remaining <= 0 or (closed is not None and closed.done()):
                break
            await self.broker.pull_hold.wait(
                query.topic, query.queue_id, query.offset, remaining, closed
            )
        self.offsets.commit_pull(query.group, query.topic, query.queue_id, result.next_begin_offset)
        self.stats.on_get(
            query.group, query.topic, result.message_count, result.buffer_total_size,
            clock.now_ms() - looked_ms, protocol,
        )  # fmt: skip
        return result

    def pull_answer(self, group: str, result: GetResult, offset: int) -> tuple[int, int]:
        """The response code and suggestWhichBrokerId of a pull from ``offset`` that got
        ``result`` (``status_map.pull_answer``), with this broker's role and settings."""
        cfg = self.groups.find(group) or SubscriptionGroupConfig(group)
        return pull_answer(
            result, offset, cfg, slave_read_enable=self.config.slave_read_enable,
            slave=self.is_slave,
        )  # fmt: skip

    # ------------------------------------------------------------------ offsets

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Raises: RequestError: TOPIC_NOT_EXIST, or INVALID_PARAMETER for a queue the topic
        does not have (an offset there would be kept and persisted for nothing)."""
        cfg = self.topic(topic)
        check_queue_id(queue_id, cfg.read_queue_nums, topic=topic)
        self.offsets.commit(group, topic, queue_id, offset)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset in a queue, -1 without one."""
        return self.offsets.query(group, topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_min_offset_in_queue(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_max_offset_in_queue(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def reset_offsets(
        self, group: str, topic: str, timestamp_ms: int, force: bool
    ) -> dict[int, int]:
        """Where each queue of a topic moves a group to (Broker2Client.resetOffset): the first
        message stored at or after ``timestamp_ms`` (-1: the queue's end), but never forward
        past the group's offset unless ``force``. Nothing is committed here.

        Raises:
            RequestError: SYSTEM_ERROR when this broker has no such topic, or the group has
                no offset in a queue of the topic (RocketMQ's codes and remarks).
        """
        cfg = self.topics.get(topic)
        if cfg is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}",
            )
        table: dict[int, int] = {}
        for queue_id in range(cfg.write_queue_nums):
            current = self.offsets.query(group, topic, queue_id)
            if current == -1:
                raise RequestError(
                    ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist"
                )
            if timestamp_ms == -1:
                target = self.max_offset(topic, queue_id)
            else:
                target = self.offset_by_time(topic, queue_id, timestamp_ms)
            target = max(target, 0)
            table[queue_id] = target if force or target < current else current
        return table

    # ------------------------------------------------------------------ groups and locks

    def ensure_retry_topic(self, group: str) -> None:
        """A group's consumers subscribe to its retry topic, so it exists from their first
        heartbeat on."""
        sub = self.groups.find(group)
        if sub is not None and sub.retry_queue_nums > 0:
            self.topics.create_system_if_absent(
                retry_topic(group), sub.retry_queue_nums, PERM_READ_WRITE
            )

    def lock_queues(
        self, group: str, client_id: str, queues: list[tuple[str, str, int]]
    ) -> list[tuple[str, str, int]]:
        """Lock what is free, expired or already the client's; returns what it now holds."""
        return self.broker.locks.try_lock_batch(group, queues, client_id)

    def unlock_queues(self, group: str, client_id: str, queues: list[tuple[str, str, int]]) -> None:
        self.broker.locks.unlock_batch(group, queues, client_id)
