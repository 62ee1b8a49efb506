"""The base of the messaging service (``broker/messaging.py``): what it reads of the broker, and
the checks every request meets before it may change or read anything - the role (a slave or a
fenced master stores nothing a client sends), the broker's permissions, the group a request
names and the topic it reads or writes. Refusals are ``RequestError`` values with RocketMQ's
remoting code and remark.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pocketmq.broker.status_map import FENCED_REFUSAL, SLAVE_REFUSAL
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.names import is_readable, is_writeable
from pocketmq.store.config import BrokerRole

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class MessagingCore:
    """The broker's parts the service reads, and the checks both halves share."""

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
        # Half messages on their way into the transaction service, each in a task held here.
        self._preparing: set[asyncio.Future[Any]] = set()

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
