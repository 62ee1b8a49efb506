"""The Telemetry stream of a 5.x client: its settings exchange, and the commands the broker
pushes to it — a producer's transaction check-backs (RecoverOrphanedTransactionCommand), as
RocketMQ's proxy writes them through the client's channel (GrpcClientChannel).

- Each stream has an ``Outbox``, a bounded queue that the stream's handler drains: replies to
  the client's commands and commands the broker pushes leave in the order they were queued.
  The client's commands are read by a task of their own, so that a push goes out while the
  client is silent.
- A producer's settings register the stream, for each topic it publishes, as a transaction
  checker of that topic's producer group (5.x producers have no group: the proxy uses the
  topic, and so does ``convert.to_message_ext`` for ``PGROUP``). The client's heartbeats
  renew the registrations of its newest stream, as the proxy's do; the end of a stream
  unregisters its own registrations only (a client that opened a new stream keeps those).
- A push never waits: the check-back service must not stall on a client that does not read.
  When a stream's outbox is full or closed, the check is dropped with a warning, and the
  half message is checked again at the next check interval.
- A consumer's settings put it in the broker's consumer table (``consumer_channel``), renewed
  by its heartbeats and removed when its stream ends, as the proxy registers 5.x consumers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pocketmq.broker.connections import DEFAULT_LANGUAGE, Connection
from pocketmq.broker.transaction.producers import CheckRequest
from pocketmq.errors import RequestError
from pocketmq.grpc import convert
from pocketmq.grpc.activity import Activity
from pocketmq.grpc.calls import ClientMeta, Context, client_meta, peer_host
from pocketmq.grpc.consumer_channel import (
    GrpcConsumerChannel,
    client_version,
    consumer_channel,
    consumer_data,
    language_of,
)
from pocketmq.grpc.convert import status
from pocketmq.grpc.messages import v2_message
from pocketmq.grpc.settings import GroupPolicy, settings_reply
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.names import SubscriptionData
from pocketmq.protocol.remoting import CURRENT_VERSION
from pocketmq.tasks import cancel_and_wait

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# Commands queued for one stream before pushes are dropped (a client that reads nothing).
OUTBOX_LIMIT = 1024
_CONSUMERS = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER)


@dataclass(frozen=True, slots=True)
class _End:
    """The client finished its side of the stream; ``error`` if reading it failed."""

    error: BaseException | None = None


@dataclass(eq=False, slots=True)
class Outbox:
    """What one Telemetry stream sends to its client."""

    client_id: str
    # The client's address, language and version, for the producer and consumer tables'
    # connections.
    peer: str = ""
    language: str = DEFAULT_LANGUAGE
    version: int = CURRENT_VERSION
    # The producer groups this stream is the checker of, with its checker of each.
    checkers: dict[str, StreamChecker] = field(default_factory=dict)
    # A consumer's registration in the consumer table: its stand-in channel, ConsumerData and
    # subscriptions (renewed by its heartbeats).
    consumer: tuple[GrpcConsumerChannel, dict[str, Any], list[SubscriptionData]] | None = None
    closed: bool = False
    queue: asyncio.Queue[svc.TelemetryCommand | _End] = field(
        default_factory=lambda: asyncio.Queue(OUTBOX_LIMIT)
    )

    def push(self, command: svc.TelemetryCommand) -> bool:
        """Queue a command the broker sends on its own; False (and a warning) when the stream
        has ended or its client has not read the last OUTBOX_LIMIT commands."""
        if self.closed:
            log.warning("telemetry stream of %s has ended: command dropped", self.client_id)
            return False
        try:
            self.queue.put_nowait(command)
        except asyncio.QueueFull:
            log.warning("telemetry stream of %s is not read: command dropped", self.client_id)
            return False
        return True


class StreamChecker:
    """A producer's transaction checker for one topic: a check becomes a
    RecoverOrphanedTransactionCommand on the producer's stream, answered by an EndTransaction
    whose source is SOURCE_SERVER_CHECK."""

    def __init__(self, outbox: Outbox, topic: pb.Resource) -> None:
        self.outbox = outbox
        self.topic = topic

    def check(self, half: MessageExt, request: CheckRequest) -> None:
        message = v2_message(half, queue_id=half.queue_id, queue_offset=half.queue_offset)
        # The topic as the producer named it, namespace apart: its EndTransaction names it so.
        message.topic.CopyFrom(self.topic)
        # The copy being checked (convert.half_offset): an end naming any copy resolves it.
        command = svc.RecoverOrphanedTransactionCommand(
            message=message, transaction_id=request.offset_msg_id
        )
        self.outbox.push(svc.TelemetryCommand(recover_orphaned_transaction_command=command))


class TelemetryActivity(Activity):
    """Telemetry: settings replies, producer registration and server-pushed commands."""

    def __init__(self, broker: Broker, host: str) -> None:
        super().__init__(broker, host)
        # The newest stream of each producer client: its registrations are the ones renewed.
        self._streams: dict[str, Outbox] = {}
        # The newest stream of each consumer client, likewise.
        self._consumer_streams: dict[str, Outbox] = {}

    async def Telemetry(
        self,
        request_iterator: AsyncIterator[svc.TelemetryCommand],
        context: Context,
    ) -> AsyncIterator[svc.TelemetryCommand]:
        meta = client_meta(context)
        if not meta.client_id:
            yield svc.TelemetryCommand(status=status(pb.CLIENT_ID_REQUIRED, "no client id"))
            # Ending the call now would fail the client's pending write with a transport
            # error instead of this answer: let it finish writing first.
            async for _ in request_iterator:
                pass
            return
        host, port = peer_host(context)
        outbox = Outbox(meta.client_id, f"{host}:{port}", language_of(meta.language),
                        client_version(meta.client_version))  # fmt: skip
        self.renewer.connected(meta.client_id)
        reader = asyncio.create_task(self._read_commands(request_iterator, meta, outbox))
        try:
            while True:
                item = await outbox.queue.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            outbox.closed = True
            await cancel_and_wait([reader])
            self._forget_stream(outbox)
            self.renewer.disconnected(meta.client_id)

    async def _read_commands(
        self, requests: AsyncIterator[svc.TelemetryCommand], meta: ClientMeta, outbox: Outbox
    ) -> None:
        """Answer each command of the client through the outbox (waiting for room: a client
        that writes without reading is slowed down, not buffered), then mark the end."""
        try:
            async for command in requests:
                reply = self._telemetry_reply(meta, command, outbox)
                if reply is not None:
                    await outbox.queue.put(reply)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the stream's end: the handler raises it
            await outbox.queue.put(_End(exc))
            return
        await outbox.queue.put(_End())

    def _telemetry_reply(
        self, meta: ClientMeta, command: svc.TelemetryCommand, outbox: Outbox
    ) -> svc.TelemetryCommand | None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            log.debug(
                "settings of %s client %s (%s %s, namespace %r, request %s)",
                convert.enum_name(pb.ClientType, command.settings.client_type), meta.client_id,
                meta.language, meta.client_version, meta.namespace, meta.request_id,
            )  # fmt: skip
            if not meta.language:
                # No x-mq-language header: the language the settings' user agent names.
                ua = convert.enum_name(pb.Language, command.settings.user_agent.language)
                outbox.language = language_of(ua)
            reply = self._settings_command(command.settings, outbox)
            if reply.status.code == pb.OK and command.settings.client_type in _CONSUMERS:
                self._register_consumer(command.settings, outbox)
            return reply
        if kind in ("thread_stack_trace", "verify_message_result"):
            # Answers to server commands; the broker sends none of those yet.
            log.debug("client %s sent an unsolicited %s", meta.client_id, kind)
            return None
        return svc.TelemetryCommand(
            status=status(pb.BAD_REQUEST, f"unexpected telemetry command {kind}")
        )

    def _settings_command(self, client: pb.Settings, outbox: Outbox) -> svc.TelemetryCommand:
        try:
            group: GroupPolicy | None = None
            if client.client_type in _CONSUMERS:
                group = self._group_policy(convert.wrap(client.subscription.group))
                self._check_filters(client.subscription)
            elif client.client_type == pb.PRODUCER:
                self._register_producer(client.publishing, outbox)
            else:
                return svc.TelemetryCommand(
                    status=status(
                        pb.UNRECOGNIZED_CLIENT_TYPE,
                        f"client type {convert.enum_name(pb.ClientType, client.client_type)}"
                        " is not served",
                    )
                )
            reply = settings_reply(client, max_body_size=self._limits.max_body_size, group=group)
            return svc.TelemetryCommand(status=status(), settings=reply)
        except RequestError as exc:
            return svc.TelemetryCommand(status=convert.status_of_error(exc))
        except Exception as exc:  # the stream's task boundary: answer, keep the stream open
            log.exception("gRPC Telemetry settings failed")
            return svc.TelemetryCommand(status=status(pb.INTERNAL_SERVER_ERROR, type(exc).__name__))

    def _register_producer(self, publishing: pb.Publishing, outbox: Outbox) -> None:
        """Make the stream the checker of each topic's producer group.

        Raises:
            GrpcRequestError: ILLEGAL_TOPIC for a bad topic (none is registered then).
        """
        topics = {convert.check_topic(resource): resource for resource in publishing.topics}
        for group, resource in topics.items():
            if group not in outbox.checkers:
                outbox.checkers[group] = StreamChecker(outbox, resource)
        self._streams[outbox.client_id] = outbox
        self.renew_producer(outbox.client_id)

    def renew_producer(self, client_id: str) -> None:
        """A producer client is alive (a heartbeat, its settings): renew the registrations of
        its newest stream."""
        outbox = self._streams.get(client_id)
        if outbox is not None:
            connection = Connection(client_id, outbox.peer, outbox.language, outbox.version)
            for group, checker in outbox.checkers.items():
                self.broker.producers.register(group, client_id, checker, connection)

    def _register_consumer(self, settings: pb.Settings, outbox: Outbox) -> None:
        """Put the stream's consumer in the consumer table (a changed group or subscription
        replaces what the stream registered before)."""
        self._forget_consumer(outbox)
        group = convert.wrap(settings.subscription.group)
        data = consumer_data(group, settings.client_type == pb.PUSH_CONSUMER)
        subs = [convert.subscription_data(convert.wrap(e.topic), e.expression)
                for e in settings.subscription.subscriptions]  # fmt: skip
        channel = consumer_channel(outbox.peer, outbox.language, outbox.version)
        outbox.consumer = (channel, data, subs)
        self._consumer_streams[outbox.client_id] = outbox
        self.renew_consumer(outbox.client_id)

    def renew_consumer(self, client_id: str) -> None:
        """A consumer client is alive (a heartbeat, its settings): renew its registration."""
        outbox = self._consumer_streams.get(client_id)
        if outbox is not None and outbox.consumer is not None:
            channel, data, subs = outbox.consumer
            self.messaging.register_consumer(channel, client_id, data, subs)

    def _forget_consumer(self, outbox: Outbox) -> None:
        if outbox.consumer is not None:
            channel, data, _ = outbox.consumer
            self.broker.consumers.unregister(channel, str(data["groupName"]))
            outbox.consumer = None

    def _forget_stream(self, outbox: Outbox) -> None:
        """Unregister what an ended stream registered (and only that)."""
        if self._streams.get(outbox.client_id) is outbox:
            del self._streams[outbox.client_id]
        if self._consumer_streams.get(outbox.client_id) is outbox:
            del self._consumer_streams[outbox.client_id]
        self._forget_consumer(outbox)
        for checker in outbox.checkers.values():
            self.broker.producers.unregister_checker(checker)
