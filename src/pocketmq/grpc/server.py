"""``apache.rocketmq.v2.MessagingService`` on grpc.aio, served from the broker process
(RocketMQ's "local" proxy mode): requests go straight to the in-process broker.

Served: QueryRoute, Heartbeat, Telemetry (settings exchange), SendMessage,
NotifyClientTermination, the consumption RPCs on the broker's POP service (QueryAssignment,
ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue), and those
of pull consumers, which keep their own position, on the store and the consumer offsets
(PullMessage, UpdateOffset, GetOffset, QueryOffset). EndTransaction answers NOT_IMPLEMENTED
in its response status until transactions exist. Outcomes, including refused requests, travel
as v2 ``Status`` values inside responses, as RocketMQ's proxy sends them; an unexpected
exception in a handler is logged and answered with INTERNAL_SERVER_ERROR, and never takes the
server down.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration

from pocketmq.broker.pop import InvalidReceiptHandle, PopRequest
from pocketmq.broker.status_map import PUT_STATUS_CODES, pull_code
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import RequestError
from pocketmq.grpc import convert
from pocketmq.grpc.calls import ClientMeta, Context, RejectUndecodable, client_meta, peer_host
from pocketmq.grpc.convert import GrpcRequestError, SendLimits, status
from pocketmq.grpc.messages import v2_message
from pocketmq.grpc.receipts import ReceiptRenewer
from pocketmq.grpc.settings import FIFO_RETRY_INTERVAL_MS, GroupPolicy, duration, settings_reply
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2 import service_pb2_grpc
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst, decode_message
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY, PERM_READ, PERM_WRITE

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# RocketMQ's proxy port for gRPC clients.
DEFAULT_GRPC_PORT = 8081
# The seed's retry ladder starts at delay level 3 (10 s), as the 4.x retry path does.
_FIRST_RETRY_LEVEL = 3
# A ReceiveMessage is held at most this long (grpcClientConsumerMaxLongPollingTimeoutMillis),
# and answers this long before the client's deadline so that the answer arrives in time.
MAX_LONG_POLLING_MS = 20_000
DEADLINE_MARGIN_MS = 500
# The largest request accepted (the proxy's grpcMaxInboundMessageSize).
MAX_INBOUND_MESSAGE_BYTES = 130 * 1024 * 1024
# The most messages one ReceiveMessage may ask for.
MAX_RECEIVE_BATCH_SIZE = 1024

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def _boundary(
    make_response: Callable[[pb.Status], Resp],
) -> Callable[
    [Callable[[MessagingService, Req, Context], Awaitable[Resp]]],
    Callable[[MessagingService, Req, Context], Awaitable[Resp]],
]:
    """A unary handler's task boundary: a refused request becomes its status, anything
    unexpected is logged with its traceback and becomes INTERNAL_SERVER_ERROR."""

    def wrap(
        fn: Callable[[MessagingService, Req, Context], Awaitable[Resp]],
    ) -> Callable[[MessagingService, Req, Context], Awaitable[Resp]]:
        async def handler(self: MessagingService, request: Req, context: Context) -> Resp:
            try:
                return await fn(self, request, context)
            except RequestError as exc:
                return make_response(convert.status_of_error(exc))
            except Exception as exc:
                log.exception("gRPC %s failed", fn.__name__)
                return make_response(status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}"))

        handler.__name__ = fn.__name__
        return handler

    return wrap


def _not_implemented(what: str) -> pb.Status:
    return status(pb.NOT_IMPLEMENTED, f"{what} is not implemented by pocketmq yet")


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, broker: Broker, host: str) -> None:
        self.broker = broker
        self.host = host
        self.port = 0  # set once the server is bound
        self._spread = itertools.count()
        self.renewer = ReceiptRenewer(
            broker.pop,
            broker.config.default_invisible_time_mills,
            broker.config.renew_ahead_time_millis,
        )

    @property
    def _limits(self) -> SendLimits:
        return SendLimits(max_body_size=self.broker.store.config.max_message_size)

    def _broker_pb(self) -> pb.Broker:
        return pb.Broker(
            name=self.broker.config.broker_name,
            id=self.broker.config.broker_id,
            endpoints=convert.endpoints(self.host, self.port),
        )

    def _group(self, group: str) -> SubscriptionGroupConfig:
        """The consumer group a request names.

        Raises:
            GrpcRequestError: ILLEGAL_CONSUMER_GROUP for a blank name, CONSUMER_GROUP_NOT_FOUND
                for an unknown group when groups are not auto-created.
        """
        if not group:
            raise GrpcRequestError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group is blank")
        cfg = self.broker.subscription_groups.find(group)
        if cfg is None:
            raise GrpcRequestError(pb.CONSUMER_GROUP_NOT_FOUND, f"group {group} does not exist")
        return cfg

    def _group_policy(self, group: str) -> GroupPolicy:
        """The consumer group's retry policy (see ``_group`` for the errors)."""
        cfg = self._group(group)
        if cfg.consume_message_orderly:
            intervals: tuple[int, ...] = (FIFO_RETRY_INTERVAL_MS,)
        else:
            levels = self.broker.store.config.delay_levels_ms
            intervals = levels[_FIRST_RETRY_LEVEL - 1 :] or levels[-1:]
        return GroupPolicy(
            max_delivery_attempts=cfg.retry_max_times + 1,
            retry_intervals_ms=intervals,
            fifo=cfg.consume_message_orderly,
        )

    # ------------------------------------------------------------------ routes, clients

    @_boundary(lambda s: svc.QueryRouteResponse(status=s))
    async def QueryRoute(
        self, request: svc.QueryRouteRequest, context: Context
    ) -> svc.QueryRouteResponse:
        topic = convert.check_topic(request.topic)
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            return svc.QueryRouteResponse(
                status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            )
        return svc.QueryRouteResponse(
            status=status(),
            message_queues=convert.message_queues(cfg, self._broker_pb(), request.topic),
        )

    @_boundary(lambda s: svc.HeartbeatResponse(status=s))
    async def Heartbeat(
        self, request: svc.HeartbeatRequest, context: Context
    ) -> svc.HeartbeatResponse:
        if not client_meta(context).client_id:
            return svc.HeartbeatResponse(status=status(pb.CLIENT_ID_REQUIRED, "no client id"))
        return svc.HeartbeatResponse(status=status())

    @_boundary(lambda s: svc.NotifyClientTerminationResponse(status=s))
    async def NotifyClientTermination(
        self, request: svc.NotifyClientTerminationRequest, context: Context
    ) -> svc.NotifyClientTerminationResponse:
        meta = client_meta(context)
        if not meta.client_id:
            return svc.NotifyClientTerminationResponse(
                status=status(pb.CLIENT_ID_REQUIRED, "no client id")
            )
        log.debug("client %s terminated", meta.client_id)
        self.renewer.forget_client(meta.client_id)
        return svc.NotifyClientTerminationResponse(status=status())

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
        self.renewer.connected(meta.client_id)
        try:
            async for command in request_iterator:
                reply = self._telemetry_reply(meta, command)
                if reply is not None:
                    yield reply
        finally:
            self.renewer.disconnected(meta.client_id)

    def _telemetry_reply(
        self, meta: ClientMeta, command: svc.TelemetryCommand
    ) -> svc.TelemetryCommand | None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            log.debug(
                "settings of %s client %s (%s %s, namespace %r, request %s)",
                pb.ClientType.Name(command.settings.client_type), meta.client_id,
                meta.language, meta.client_version, meta.namespace, meta.request_id,
            )  # fmt: skip
            return self._settings_command(command.settings)
        if kind in ("thread_stack_trace", "verify_message_result"):
            # Answers to server commands; the broker sends none of those yet.
            log.debug("client %s sent an unsolicited %s", meta.client_id, kind)
            return None
        return svc.TelemetryCommand(
            status=status(pb.BAD_REQUEST, f"unexpected telemetry command {kind}")
        )

    def _settings_command(self, client: pb.Settings) -> svc.TelemetryCommand:
        try:
            group: GroupPolicy | None = None
            if client.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
                group = self._group_policy(convert.wrap(client.subscription.group))
            elif client.client_type != pb.PRODUCER:
                return svc.TelemetryCommand(
                    status=status(
                        pb.UNRECOGNIZED_CLIENT_TYPE,
                        f"client type {pb.ClientType.Name(client.client_type)} is not served",
                    )
                )
            reply = settings_reply(client, max_body_size=self._limits.max_body_size, group=group)
            return svc.TelemetryCommand(status=status(), settings=reply)
        except RequestError as exc:
            return svc.TelemetryCommand(status=convert.status_of_error(exc))
        except Exception as exc:  # the stream's task boundary: answer, keep the stream open
            log.exception("gRPC Telemetry settings failed")
            return svc.TelemetryCommand(status=status(pb.INTERNAL_SERVER_ERROR, type(exc).__name__))

    # ------------------------------------------------------------------ send

    @_boundary(lambda s: svc.SendMessageResponse(status=s))
    async def SendMessage(
        self, request: svc.SendMessageRequest, context: Context
    ) -> svc.SendMessageResponse:
        if not request.messages:
            return svc.SendMessageResponse(status=status(pb.BAD_REQUEST, "no message to send"))
        born_host = peer_host(context)
        entries = [await self._send_one(msg, born_host) for msg in request.messages]
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            overall = entries[0].status
        else:
            overall = status(pb.MULTIPLE_RESULTS, "the messages had different outcomes")
        return svc.SendMessageResponse(status=overall, entries=entries)

    async def _send_one(
        self, message: pb.Message, born_host: tuple[str, int]
    ) -> svc.SendResultEntry:
        message_id = message.system_properties.message_id
        try:
            msg = convert.to_message_ext(message, self._limits, born_host)
            cfg = self.broker.processors.topic_for_send(
                msg.topic, AUTO_CREATE_TOPIC_KEY, self.broker.config.default_topic_queue_nums
            )
            msg.queue_id = convert.queue_for(msg, cfg.write_queue_nums, next(self._spread))
            msg.store_host = self.broker.store.commitlog.store_host
            result = await self.broker.processors.put_single(msg)
        except RequestError as exc:
            return svc.SendResultEntry(status=convert.status_of_error(exc), message_id=message_id)
        code, remark = PUT_STATUS_CODES[result.status]
        if not result.ok:
            return svc.SendResultEntry(
                status=convert.status_of_response_code(code, f"{remark} {result.detail}".strip()),
                message_id=message_id,
            )
        return svc.SendResultEntry(
            status=status(),
            message_id=msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX],
            offset=result.queue_offset,
        )

    # ------------------------------------------------------------------ offsets

    def _queue(self, mq: pb.MessageQueue) -> tuple[TopicConfig, int]:
        """The topic config and queue id of a request's queue, which must be one of ours.

        Raises:
            GrpcRequestError: ILLEGAL_TOPIC or TOPIC_NOT_FOUND; BAD_REQUEST for another broker's
                queue or a queue id the topic does not have.
        """
        topic = convert.check_topic(mq.topic)
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            raise GrpcRequestError(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        name = self.broker.config.broker_name
        if mq.broker.name and mq.broker.name != name:
            raise GrpcRequestError(
                pb.BAD_REQUEST, f"the queue is on broker {mq.broker.name}, this is broker {name}"
            )
        if not 0 <= mq.id < cfg.read_queue_nums:
            raise GrpcRequestError(
                pb.BAD_REQUEST,
                f"queue id {mq.id} is illegal, topic {topic} has {cfg.read_queue_nums} read queues",
            )
        return cfg, mq.id

    @staticmethod
    def _long_polling_ms(timeout: Duration | None, context: Context) -> int:
        """How long a request may wait for messages: what it asks for (until its deadline when
        it asks for nothing), at most MAX_LONG_POLLING_MS and ending before the deadline."""
        remaining = context.time_remaining()
        left_ms = None if remaining is None else int(remaining * 1000) - DEADLINE_MARGIN_MS
        if timeout is not None:
            wait_ms = convert.duration_ms(timeout)
        else:
            wait_ms = MAX_LONG_POLLING_MS if left_ms is None else left_ms
        wait_ms = min(wait_ms, MAX_LONG_POLLING_MS)
        if left_ms is not None:
            wait_ms = min(wait_ms, left_ms)
        return max(wait_ms, 0)

    async def PullMessage(
        self, request: svc.PullMessageRequest, context: Context
    ) -> AsyncIterator[svc.PullMessageResponse]:
        """Server streaming: a status, the messages found, then the offset to pull from next
        (past messages the filter skipped). An offset outside the queue answers ILLEGAL_OFFSET
        with the offset to resume from, as a 4.x pull answers PULL_OFFSET_MOVED."""
        for response in await self._pull(request, context):
            yield response

    @_boundary(lambda s: [svc.PullMessageResponse(status=s)])
    async def _pull(
        self, request: svc.PullMessageRequest, context: Context
    ) -> list[svc.PullMessageResponse]:
        group = convert.wrap(request.group)
        self._group(group)
        cfg, queue_id = self._queue(request.message_queue)
        topic = cfg.topic_name
        if not self.broker.config.broker_permission & PERM_READ:
            raise GrpcRequestError(pb.FORBIDDEN, "the broker pulling message is forbidden")
        if not cfg.perm & PERM_READ:
            raise GrpcRequestError(pb.FORBIDDEN, f"the topic {topic} pulling message is forbidden")
        if request.batch_size <= 0:
            raise GrpcRequestError(pb.BAD_REQUEST, "batch_size must be positive")
        tags, tag_names = convert.tag_filter(request.filter_expression)
        timeout = request.long_polling_timeout if request.HasField("long_polling_timeout") else None
        deadline = time.monotonic() + self._long_polling_ms(timeout, context) / 1000
        offset = request.offset
        while True:
            result = self.broker.store.get_message(
                topic, queue_id, offset, request.batch_size, tags
            )
            code = pull_code(result.status, offset)
            remaining = deadline - time.monotonic()
            if code != ResponseCode.PULL_NOT_FOUND or remaining <= 0:
                break
            await self.broker.pull_hold.wait(topic, queue_id, offset, remaining)
        next_offset = result.next_begin_offset
        self.broker.offsets.commit_pull(group, topic, queue_id, next_offset)
        if code == ResponseCode.PULL_OFFSET_MOVED:
            moved = status(
                pb.ILLEGAL_OFFSET,
                f"offset {offset} is outside queue {queue_id} of {topic} "
                f"({result.min_offset}..{result.max_offset}), pull from {next_offset}",
            )
            return [
                svc.PullMessageResponse(status=moved),
                svc.PullMessageResponse(next_offset=next_offset),
            ]
        responses = [svc.PullMessageResponse(status=status())]
        for raw in result.messages:
            msg = decode_message(raw)
            # The store matched tag hashes only; a colliding tag is skipped here.
            if tag_names is None or msg.tags in tag_names:
                message = v2_message(msg, queue_id=queue_id, queue_offset=msg.queue_offset)
                message.topic.CopyFrom(request.message_queue.topic)  # the client's namespace
                responses.append(svc.PullMessageResponse(message=message))
        responses.append(svc.PullMessageResponse(next_offset=next_offset))
        return responses

    @_boundary(lambda s: svc.UpdateOffsetResponse(status=s))
    async def UpdateOffset(
        self, request: svc.UpdateOffsetRequest, context: Context
    ) -> svc.UpdateOffsetResponse:
        """Commit the offset a group consumes next in a queue (persisted with the 4.x ones)."""
        group = convert.wrap(request.group)
        self._group(group)
        cfg, queue_id = self._queue(request.message_queue)
        if request.offset < 0:
            return svc.UpdateOffsetResponse(
                status=status(pb.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
            )
        self.broker.offsets.commit(group, cfg.topic_name, queue_id, request.offset)
        return svc.UpdateOffsetResponse(status=status())

    @_boundary(lambda s: svc.GetOffsetResponse(status=s))
    async def GetOffset(
        self, request: svc.GetOffsetRequest, context: Context
    ) -> svc.GetOffsetResponse:
        """A group's committed offset in a queue. Without one the answer is OFFSET_NOT_FOUND,
        unlike a 4.x query (which answers 0 for a queue that never lost a message): a pull
        consumer then starts where its own policy says, by QueryOffset."""
        group = convert.wrap(request.group)
        if not group:
            raise GrpcRequestError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group is blank")
        cfg, queue_id = self._queue(request.message_queue)
        offset = self.broker.offsets.query(group, cfg.topic_name, queue_id)
        if offset < 0:
            return svc.GetOffsetResponse(
                status=status(
                    pb.OFFSET_NOT_FOUND,
                    f"group {group} has no offset in queue {queue_id} of {cfg.topic_name}",
                )
            )
        return svc.GetOffsetResponse(status=status(), offset=offset)

    @_boundary(lambda s: svc.QueryOffsetResponse(status=s))
    async def QueryOffset(
        self, request: svc.QueryOffsetRequest, context: Context
    ) -> svc.QueryOffsetResponse:
        """A queue's first offset still stored (BEGINNING), the offset its next message gets
        (END), or the first offset stored at or after a time (TIMESTAMP; END when none is)."""
        cfg, queue_id = self._queue(request.message_queue)
        topic = cfg.topic_name
        store = self.broker.store
        policy = request.query_offset_policy
        if policy == pb.BEGINNING:
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif policy == pb.END:
            offset = store.get_max_offset_in_queue(topic, queue_id)
        elif policy == pb.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise GrpcRequestError(pb.BAD_REQUEST, "a TIMESTAMP query needs a timestamp")
            at_ms = convert.timestamp_ms(request.timestamp)
            offset = store.get_offset_in_queue_by_time(topic, queue_id, at_ms)
        else:
            raise GrpcRequestError(pb.BAD_REQUEST, f"query offset policy {policy} is unknown")
        return svc.QueryOffsetResponse(status=status(), offset=offset)

    # ------------------------------------------------------------------ consumption (POP)

    @_boundary(lambda s: svc.QueryAssignmentResponse(status=s))
    async def QueryAssignment(
        self, request: svc.QueryAssignmentRequest, context: Context
    ) -> svc.QueryAssignmentResponse:
        """What a push consumer receives from: the whole broker (queue id -1, the broker pops
        from every queue) for concurrent groups, each queue for FIFO groups, as the proxy
        answers."""
        topic = convert.check_topic(request.topic)
        policy = self._group_policy(convert.wrap(request.group))
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            return svc.QueryAssignmentResponse(
                status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            )
        if not cfg.perm & PERM_READ or cfg.read_queue_nums <= 0:
            return svc.QueryAssignmentResponse(status=status(pb.FORBIDDEN, "no readable queue"))
        queue_ids = range(cfg.read_queue_nums) if policy.fifo else (-1,)
        broker = self._broker_pb()
        return svc.QueryAssignmentResponse(
            status=status(),
            assignments=[
                pb.Assignment(
                    message_queue=pb.MessageQueue(
                        topic=request.topic, id=queue_id,
                        permission=pb.READ_WRITE if cfg.perm & PERM_WRITE else pb.READ,
                        broker=broker, accept_message_types=convert.ACCEPTED_MESSAGE_TYPES,
                    )
                )
                for queue_id in queue_ids
            ],
        )  # fmt: skip

    def _pop_request(
        self, request: svc.ReceiveMessageRequest, context: Context
    ) -> tuple[PopRequest, int]:
        """The broker's pop of a ReceiveMessage, and how long it may wait (ms).

        Raises:
            GrpcRequestError: a bad topic, group, batch size, filter or invisible time.
        """
        topic = convert.check_topic(request.message_queue.topic)
        group = convert.wrap(request.group)
        policy = self._group_policy(group)
        if request.batch_size <= 0 or request.batch_size > MAX_RECEIVE_BATCH_SIZE:
            raise GrpcRequestError(
                pb.BAD_REQUEST, f"batch_size must be 1..{MAX_RECEIVE_BATCH_SIZE}"
            )
        config = self.broker.config
        if request.auto_renew:
            invisible_ms = config.default_invisible_time_mills
        else:
            invisible_ms = convert.duration_ms(request.invisible_duration)
            if not (
                config.min_invisible_time_mills_for_recv
                <= invisible_ms
                <= config.max_invisible_time_mills
            ):
                raise GrpcRequestError(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"invisible_duration must be {config.min_invisible_time_mills_for_recv}.."
                    f"{config.max_invisible_time_mills} ms, got {invisible_ms} ms",
                )
        tags, tag_set = convert.tag_filter(request.filter_expression)
        poll_ms = self._long_polling_ms(
            request.long_polling_timeout if request.HasField("long_polling_timeout") else None,
            context,
        )
        pop = PopRequest(
            group=group, topic=topic, max_nums=request.batch_size, invisible_ms=invisible_ms,
            tags=tags, tag_set=tag_set, fifo=policy.fifo,
            max_attempts=policy.max_delivery_attempts,
        )  # fmt: skip
        return pop, poll_ms

    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        """Server streaming, as the proxy writes it: a status, one response per message, then
        the delivery timestamp; or a lone MESSAGE_NOT_FOUND after the long poll."""
        meta = client_meta(context)
        try:
            pop, poll_ms = self._pop_request(request, context)
            popped = await self.broker.pop.pop(pop, poll_ms)
        except RequestError as exc:
            yield svc.ReceiveMessageResponse(status=convert.status_of_error(exc))
            return
        except Exception as exc:  # the call's task boundary
            log.exception("gRPC ReceiveMessage failed")
            yield svc.ReceiveMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, type(exc).__name__)
            )
            return
        if not popped:
            yield svc.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield svc.ReceiveMessageResponse(status=status())
        for p in popped:
            message = v2_message(
                p.msg, topic=p.topic, queue_id=p.msg.queue_id, queue_offset=p.msg.queue_offset
            )
            message.topic.CopyFrom(request.message_queue.topic)  # the client's namespace
            sp = message.system_properties
            sp.receipt_handle = p.handle
            sp.delivery_attempt = p.attempt
            sp.invisible_duration.CopyFrom(duration(p.invisible_ms))
            if request.auto_renew and meta.client_id:
                self.renewer.track(meta.client_id, pop.group, sp.message_id, p.topic, p.handle)
            yield svc.ReceiveMessageResponse(message=message)
        yield svc.ReceiveMessageResponse(delivery_timestamp=convert.timestamp_now())

    @_boundary(lambda s: svc.AckMessageResponse(status=s))
    async def AckMessage(
        self, request: svc.AckMessageRequest, context: Context
    ) -> svc.AckMessageResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        if not request.entries:
            return svc.AckMessageResponse(status=status(pb.BAD_REQUEST, "no entry to ack"))
        client_id = client_meta(context).client_id
        results = []
        for entry in request.entries:
            try:
                handle = await self.renewer.settle(
                    client_id, group, entry.message_id, entry.receipt_handle
                )
                await self.broker.pop.ack(group, topic, handle)
                outcome = status()
            except RequestError as exc:
                outcome = self._consume_status(exc)
            results.append(
                svc.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                    status=outcome,
                )
            )  # fmt: skip
        codes = {r.status.code for r in results}
        overall = results[0].status if len(codes) == 1 else status(
            pb.MULTIPLE_RESULTS, "the entries had different outcomes"
        )  # fmt: skip
        return svc.AckMessageResponse(status=overall, entries=results)

    def _group_and_topic(self, group: pb.Resource, topic: pb.Resource) -> tuple[str, str]:
        """The broker's names of the group and topic an ack, change or forward names.

        Raises:
            GrpcRequestError: an illegal topic, or a blank or unknown group.
        """
        topic_name = convert.check_topic(topic)
        group_name = convert.wrap(group)
        self._group(group_name)
        return group_name, topic_name

    @staticmethod
    def _consume_status(exc: RequestError) -> pb.Status:
        if isinstance(exc, InvalidReceiptHandle):
            return status(pb.INVALID_RECEIPT_HANDLE, exc.remark)
        return convert.status_of_error(exc)

    @_boundary(lambda s: svc.ChangeInvisibleDurationResponse(status=s))
    async def ChangeInvisibleDuration(
        self, request: svc.ChangeInvisibleDurationRequest, context: Context
    ) -> svc.ChangeInvisibleDurationResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        invisible_ms = convert.duration_ms(request.invisible_duration)
        if not 0 <= invisible_ms <= self.broker.config.max_invisible_time_mills:
            return svc.ChangeInvisibleDurationResponse(
                status=status(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"invisible_duration must be 0..{self.broker.config.max_invisible_time_mills}"
                    f" ms, got {invisible_ms} ms",
                )
            )
        try:
            handle = await self.renewer.settle(
                client_meta(context).client_id, group, request.message_id, request.receipt_handle
            )
            new = await self.broker.pop.change_invisible(group, topic, handle, invisible_ms)
        except RequestError as exc:
            return svc.ChangeInvisibleDurationResponse(status=self._consume_status(exc))
        return svc.ChangeInvisibleDurationResponse(status=status(), receipt_handle=new)

    @_boundary(lambda s: svc.ForwardMessageToDeadLetterQueueResponse(status=s))
    async def ForwardMessageToDeadLetterQueue(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        try:
            handle = await self.renewer.settle(
                client_meta(context).client_id, group, request.message_id, request.receipt_handle
            )
            await self.broker.pop.forward_to_dead_letter(group, topic, handle)
        except RequestError as exc:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=self._consume_status(exc))
        return svc.ForwardMessageToDeadLetterQueueResponse(status=status())

    # ------------------------------------------------------------------ not served yet

    async def EndTransaction(
        self, request: svc.EndTransactionRequest, context: Context
    ) -> svc.EndTransactionResponse:
        return svc.EndTransactionResponse(status=_not_implemented("EndTransaction"))


class GrpcService:
    """The gRPC endpoint of one broker: ``start()`` binds and serves, ``stop()`` ends calls
    in flight after a grace period."""

    def __init__(self, broker: Broker, host: str, port: int = DEFAULT_GRPC_PORT) -> None:
        self.host = host
        self.port = port
        self.service = MessagingService(broker, broker.config.broker_ip1)
        self._server: grpc.aio.Server | None = None

    async def start(self) -> int:
        """Bind and serve; returns the bound port (a free one when asked for 0).

        Raises:
            OSError: the address cannot be bound.
        """
        server = grpc.aio.server(
            interceptors=[RejectUndecodable()],
            # grpc's 4 MiB default would refuse, as a transport error, a request carrying a body
            # of exactly the size the settings reply allows; our own check answers past it.
            options=[("grpc.max_receive_message_length", MAX_INBOUND_MESSAGE_BYTES)],
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self.service, server)  # type: ignore[no-untyped-call]
        try:
            # grpc reports a failed bind as RuntimeError ("Failed to bind to address").
            port = server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        await server.start()
        self.service.renewer.start()
        self._server = server
        self.port = self.service.port = port
        log.info("gRPC endpoint listening on %s:%d", self.host, port)
        return port

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            await self.service.renewer.stop()
            self._server = None
