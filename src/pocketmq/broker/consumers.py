"""Consumer groups as heartbeats describe them (ConsumerManager), and their change notices.

A client joins a group with HEART_BEAT and leaves with UNREGISTER_CLIENT, by closing its
connection, or by staying silent for ``expire_ms``. Whenever the members of a group change,
every member gets NOTIFY_CONSUMER_IDS_CHANGED so that it rebalances at once. Heartbeat times
and expiry are read from the injected clock; the broker calls ``scan_expired`` periodically.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientInfo:
    client_id: str
    last_update_ms: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: Any = None
    message_model: Any = None
    consume_from_where: Any = None
    # topic -> subscription data as the client sent it
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[RemotingChannel, ClientInfo] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


class ConsumerManager:
    def __init__(self, expire_ms: int, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.expire_ms = expire_ms
        self.clock = clock
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, channel: RemotingChannel, client_id: str, data: dict[str, Any]) -> None:
        group = str(data.get("groupName", ""))
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = data.get("consumeType")
        info.message_model = data.get("messageModel")
        info.consume_from_where = data.get("consumeFromWhere")
        subs = data.get("subscriptionDataSet") or []
        info.subscriptions = {str(s.get("topic")): s for s in subs if isinstance(s, dict)}
        before = info.client_ids()
        info.channels[channel] = ClientInfo(client_id, self.clock.now_ms())
        if info.client_ids() != before:
            log.info("consumer %s joined group %s", client_id, group)
            self._notify(info)

    def unregister(self, channel: RemotingChannel, group: str) -> None:
        info = self.groups.get(group)
        if info is not None and info.channels.pop(channel, None) is not None:
            self._after_leave(info)

    def on_channel_closed(self, channel: RemotingChannel) -> None:
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

    def channels(self, group: str) -> list[RemotingChannel]:
        """The connections of a group's live consumers."""
        info = self.groups.get(group)
        return list(info.channels) if info else []

    def find_channel(self, group: str, client_id: str) -> RemotingChannel | None:
        """The connection of one consumer of a group, by the client id it heartbeats with."""
        info = self.groups.get(group)
        channels = info.channels.items() if info else ()
        return next((ch for ch, c in channels if c.client_id == client_id), None)
