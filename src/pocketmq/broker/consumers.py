"""Consumer groups as heartbeats describe them (ConsumerManager), and their change notices.

A client joins a group with HEART_BEAT and leaves with UNREGISTER_CLIENT, by closing its
connection, or by staying silent for ``expire_ms``. Whenever the members of a group change,
every member gets NOTIFY_CONSUMER_IDS_CHANGED so that it rebalances at once. Heartbeat times
and expiry are read from the injected clock; the broker calls ``scan_expired`` periodically.

Each group keeps the subscriptions its heartbeats declare, one per topic, compiled: a pull
that does not carry its subscription is filtered with the group's (ConsumerGroupInfo's
updateSubscription: a topic's subscription is replaced only by a newer ``subVersion``, and
topics no longer declared are dropped).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pocketmq.broker.connections import DEFAULT_LANGUAGE, Connection
from pocketmq.broker.filtering import Subscription
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.remoting import RemotingCommand

log = logging.getLogger(__name__)


class ConsumerChannel(Protocol):
    """A consumer's connection: a remoting channel, or the stand-in of a 5.x gRPC client
    (``grpc/consumer_channel.py``), as RocketMQ's proxy registers those in this table too."""

    peer: str
    attributes: dict[str, Any]

    def invoke_oneway(self, cmd: RemotingCommand) -> None: ...

    async def invoke(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class ClientInfo:
    client_id: str
    last_update_ms: int
    # What the client's heartbeat said of itself (ClientChannelInfo's language and version).
    language: str = DEFAULT_LANGUAGE
    version: int = 0


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: Any = None
    message_model: Any = None
    consume_from_where: Any = None
    subscriptions: dict[str, Subscription] = field(default_factory=dict)  # by topic
    channels: dict[ConsumerChannel, ClientInfo] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})

    def update_subscriptions(self, subscriptions: Sequence[Subscription]) -> None:
        """Take a heartbeat's subscriptions: new topics are added, a topic's subscription is
        replaced only by a newer version, and topics it does not name are dropped."""
        declared = {}
        for sub in subscriptions:
            old = self.subscriptions.get(sub.topic)
            declared[sub.topic] = sub if old is None or sub.sub_version > old.sub_version else old
        for topic in self.subscriptions.keys() - declared.keys():
            log.info("group %s no longer subscribes to %s", self.group, topic)
        self.subscriptions = declared


class ConsumerManager:
    def __init__(self, expire_ms: int, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.expire_ms = expire_ms
        self.clock = clock
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def register(
        self,
        channel: ConsumerChannel,
        client_id: str,
        data: dict[str, Any],
        subscriptions: Sequence[Subscription] = (),
    ) -> None:
        """A heartbeat's ConsumerData for one group, with its subscriptions compiled."""
        group = str(data.get("groupName", ""))
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = data.get("consumeType")
        info.message_model = data.get("messageModel")
        info.consume_from_where = data.get("consumeFromWhere")
        info.update_subscriptions(subscriptions)
        before = info.client_ids()
        info.channels[channel] = ClientInfo(
            client_id,
            self.clock.now_ms(),
            str(channel.attributes.get("language", DEFAULT_LANGUAGE)),
            int(channel.attributes.get("version", 0)),
        )
        if info.client_ids() != before:
            log.info("consumer %s joined group %s", client_id, group)
            self._notify(info)

    def unregister(self, channel: ConsumerChannel, group: str) -> None:
        info = self.groups.get(group)
        if info is not None and info.channels.pop(channel, None) is not None:
            self._after_leave(info)

    def on_channel_closed(self, channel: ConsumerChannel) -> None:
        for info in list(self.groups.values()):
            if info.channels.pop(channel, None) is not None:
                self._after_leave(info)

    def scan_expired(self) -> None:
        """Drop (and close) every channel silent for longer than ``expire_ms``."""
        now_ms = self.clock.now_ms()
        for info in list(self.groups.values()):
            stale = [
                ch for ch, c in info.channels.items() if c.last_update_ms + self.expire_ms < now_ms
            ]
            for ch in stale:
                log.warning("consumer %s of %s expired", info.channels[ch].client_id, info.group)
                del info.channels[ch]
                ch.close()
            if stale:
                self._after_leave(info)

    def _after_leave(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self._notify(info)
        else:
            del self.groups[info.group]

    @staticmethod
    def _notify(info: ConsumerGroupInfo) -> None:
        for channel in list(info.channels):
            channel.invoke_oneway(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": info.group}
                )
            )

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return info.client_ids() if info else []

    def channels(self, group: str) -> list[ConsumerChannel]:
        """The connections of a group's live consumers."""
        info = self.groups.get(group)
        return list(info.channels) if info else []

    def find_channel(self, group: str, client_id: str) -> ConsumerChannel | None:
        """The connection of one consumer of a group, by the client id it heartbeats with."""
        info = self.groups.get(group)
        channels = info.channels.items() if info else ()
        return next((ch for ch, c in channels if c.client_id == client_id), None)

    def connections(self, group: str) -> list[Connection]:
        """The group's live consumers as GET_CONSUMER_CONNECTION_LIST lists them."""
        info = self.groups.get(group)
        channels = info.channels.items() if info else ()
        return [Connection(c.client_id, ch.peer, c.language, c.version) for ch, c in channels]

    def groups_of_topic(self, topic: str) -> set[str]:
        """The online groups subscribing to topic (ConsumerManager.queryTopicConsumeByWho)."""
        return {name for name, info in self.groups.items() if topic in info.subscriptions}
