"""The consuming half of the messaging service (``broker/messaging.py``): subscriptions (the
one a request carries or the one its group's heartbeats registered, compiled by
``filtering``), the pull (group, queue and subscription checks, then the one long-polling loop,
released when the request's connection closes; a slave tells pulls which broker to read from
next), committed offsets and their reset, a group's retry topic and queue locks.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.filtering import FilterNotSupported, Subscription, compile_subscription
from pocketmq.broker.messaging_core import MessagingCore
from pocketmq.broker.stats import Protocol
from pocketmq.broker.status_map import pull_answer, pull_code
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import check_queue_id
from pocketmq.protocol.names import PERM_READ_WRITE, SubscriptionData, retry_topic
from pocketmq.store import GetResult, MessageFilter

if TYPE_CHECKING:
    from pocketmq.broker.consumers import ConsumerChannel


@dataclass(frozen=True, slots=True)
class PullQuery:
    """One pull of a queue by offset."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    filter: MessageFilter | None = None


class ConsumingService(MessagingCore):
    """Subscriptions, pulls, offsets and locks; ``MessagingService`` adds the sending half."""

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
