"""Live producers by group (RocketMQ's ProducerManager): the broker's one producer table,
read by GET_PRODUCER_CONNECTION_LIST and by the transaction check-back.

A producer joins its group with each heartbeat (remoting: HEART_BEAT's ``producerDataSet``;
the gRPC edge registers its Telemetry streams), which also renews it; it leaves with
UNREGISTER_CLIENT, when its connection closes, or after ``expire_ms`` without renewal
(``channel_expired_timeout``, on the injected clock; the broker calls ``scan_expired``
periodically). Each registration carries the producer's ``Connection`` (client id, address,
language, version) and a ``TransactionChecker``: the way to ask that
producer about a half message. The remoting one sends CHECK_TRANSACTION_STATE (39) one-way
over the producer's connection, as Broker2Client.checkProducerTransactionState does.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Protocol

from pocketmq.broker.connections import Connection
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import encode_record
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """What CHECK_TRANSACTION_STATE carries (CheckTransactionStateRequestHeader): the half's
    queue offset and CommitLog offset (what the producer's END_TRANSACTION must name), the
    producer's message id (UNIQ_KEY, "" without one), the broker's offset message id, the
    transaction id (the UNIQ_KEY too) and the topic the half is stored in."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str
    offset_msg_id: str
    transaction_id: str
    topic: str


class TransactionChecker(Protocol):
    def check(self, half: MessageExt, request: CheckRequest) -> None:
        """Ask the producer about ``half`` (its real topic and queue restored); fire and
        forget: the answer, if any, comes as an end of the transaction."""
        ...


@dataclass(frozen=True, slots=True)
class RemotingChecker:
    """Asks a 4.x producer over its remoting connection. Equal for one connection, so that a
    closed connection finds the registrations it made."""

    channel: RemotingChannel
    broker_name: str

    def check(self, half: MessageExt, request: CheckRequest) -> None:
        header: dict[str, str | int] = {
            "topic": request.topic,
            "tranStateTableOffset": request.tran_state_table_offset,
            "commitLogOffset": request.commit_log_offset,
            "offsetMsgId": request.offset_msg_id,
            "bname": self.broker_name,
        }
        # RocketMQ leaves a null field out of the header.
        if request.msg_id:
            header["msgId"] = request.msg_id
        if request.transaction_id:
            header["transactionId"] = request.transaction_id
        cmd = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header, bytes(encode_record(half))
        )
        self.channel.invoke_oneway(cmd)


@dataclass(slots=True)
class _Member:
    checker: TransactionChecker
    last_update_ms: int
    connection: Connection


class ProducerRegistry:
    def __init__(self, expire_ms: int, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.expire_ms = expire_ms
        self.clock = clock
        # group -> client id -> member, in joining order
        self.groups: dict[str, dict[str, _Member]] = {}
        self._turn = itertools.count()

    def register(
        self,
        group: str,
        client_id: str,
        checker: TransactionChecker,
        connection: Connection | None = None,
    ) -> None:
        """Join ``group`` (or renew the membership) with the way to check this producer and
        its connection (by default one known only by its client id)."""
        members = self.groups.setdefault(group, {})
        if client_id not in members:
            log.info("producer %s joined group %s", client_id, group)
        if connection is None:
            connection = Connection(client_id, "")
        members[client_id] = _Member(checker, self.clock.now_ms(), connection)

    def unregister(self, group: str, client_id: str) -> None:
        members = self.groups.get(group)
        if members is not None and members.pop(client_id, None) is not None:
            log.info("producer %s left group %s", client_id, group)
            if not members:
                del self.groups[group]

    def unregister_all(self, client_id: str) -> None:
        """The client is gone (its connection closed): out of every group."""
        for group in list(self.groups):
            self.unregister(group, client_id)

    def unregister_checker(self, checker: TransactionChecker) -> None:
        """Every registration made with ``checker`` (a closed connection's), and only those: a
        client that reconnected and registered anew keeps its new registration."""
        for group, members in list(self.groups.items()):
            for client_id, member in list(members.items()):
                if member.checker == checker:
                    self.unregister(group, client_id)

    def pick(self, group: str) -> TransactionChecker | None:
        """A live producer of the group, taking the members in turn, so that the checks spread
        over them; None when the group has none."""
        members = self.groups.get(group)
        if not members:
            return None
        ordered = list(members.values())
        return ordered[next(self._turn) % len(ordered)].checker

    def scan_expired(self) -> None:
        """Drop every producer not renewed for longer than ``expire_ms``."""
        now_ms = self.clock.now_ms()
        for group, members in list(self.groups.items()):
            for client_id, member in list(members.items()):
                if member.last_update_ms + self.expire_ms < now_ms:
                    log.warning("producer %s of %s expired", client_id, group)
                    self.unregister(group, client_id)

    def client_ids(self, group: str) -> list[str]:
        return sorted(self.groups.get(group, {}))

    def connections(self, group: str) -> list[Connection] | None:
        """The group's live producers as GET_PRODUCER_CONNECTION_LIST lists them; None when
        the group has none (RocketMQ's "not exist")."""
        members = self.groups.get(group)
        return [m.connection for m in members.values()] if members else None
