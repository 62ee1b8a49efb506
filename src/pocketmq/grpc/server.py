"""``apache.rocketmq.v2.MessagingService`` on grpc.aio, served from the broker process
(RocketMQ's "local" proxy mode): requests go straight to the in-process broker.

Served: QueryRoute, Heartbeat, Telemetry (settings exchange), SendMessage and
NotifyClientTermination. The consumption RPCs (QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue) and EndTransaction answer
NOT_IMPLEMENTED in their response status, so a client fails with a clear reason. Outcomes,
including refused requests, travel as v2 ``Status`` values inside responses, as RocketMQ's
proxy sends them; an unexpected exception in a handler is logged and answered with
INTERNAL_SERVER_ERROR, and never takes the server down.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import grpc
from google.protobuf.message import DecodeError

from pocketmq.broker.status_map import PUT_STATUS_CODES
from pocketmq.broker.topics import AUTO_CREATE_TOPIC_KEY
from pocketmq.errors import RequestError
from pocketmq.grpc import convert
from pocketmq.grpc.convert import GrpcRequestError, SendLimits, status
from pocketmq.grpc.settings import FIFO_RETRY_INTERVAL_MS, GroupPolicy, settings_reply
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2 import service_pb2_grpc
from pocketmq.protocol.message import MessageConst

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# RocketMQ's proxy port for gRPC clients.
DEFAULT_GRPC_PORT = 8081
# The seed's retry ladder starts at delay level 3 (10 s), as the 4.x retry path does.
_FIRST_RETRY_LEVEL = 3

Req = TypeVar("Req")
Resp = TypeVar("Resp")
# The generated servicer is untyped; handlers take the context of any call.
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


@dataclass(frozen=True, slots=True)
class ClientMeta:
    """What a 5.x client says about itself in the metadata of every call."""

    client_id: str
    request_id: str
    language: str
    client_version: str
    namespace: str
    # Read so that an ACL can check it later; not verified (the broker has no ACL yet).
    authorization: str


def client_meta(context: Context) -> ClientMeta:
    metadata = context.invocation_metadata() or ()
    values = {key: value for key, value in metadata if isinstance(value, str)}
    return ClientMeta(
        client_id=values.get("x-mq-client-id", ""),
        request_id=values.get("x-mq-request-id", ""),
        language=values.get("x-mq-language", ""),
        client_version=values.get("x-mq-client-version", ""),
        namespace=values.get("x-mq-namespace", ""),
        authorization=values.get("authorization", ""),
    )


def peer_host(context: Context) -> tuple[str, int]:
    """The client's address as gRPC reports it (``ipv4:1.2.3.4:5`` or ``ipv6:[::1]:5``); the
    loopback address when it is not an IP socket, since records need an address."""
    kind, _, rest = context.peer().partition(":")
    host, _, port = rest.rpartition(":")
    if kind in ("ipv4", "ipv6") and port.isdigit():
        return host.strip("[]"), int(port)
    return "127.0.0.1", 0


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

    @property
    def _limits(self) -> SendLimits:
        return SendLimits(max_body_size=self.broker.store.config.max_message_size)

    def _broker_pb(self) -> pb.Broker:
        return pb.Broker(
            name=self.broker.config.broker_name,
            id=self.broker.config.broker_id,
            endpoints=convert.endpoints(self.host, self.port),
        )

    def _group_policy(self, group: str) -> GroupPolicy:
        """The consumer group's retry policy.

        Raises:
            GrpcRequestError: ILLEGAL_CONSUMER_GROUP for a blank name, CONSUMER_GROUP_NOT_FOUND
                for an unknown group when groups are not auto-created.
        """
        if not group:
            raise GrpcRequestError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group is blank")
        cfg = self.broker.subscription_groups.find(group)
        if cfg is None:
            raise GrpcRequestError(pb.CONSUMER_GROUP_NOT_FOUND, f"group {group} does not exist")
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
            status=status(), message_queues=convert.message_queues(cfg, self._broker_pb())
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
        async for command in request_iterator:
            kind = command.WhichOneof("command")
            if kind == "settings":
                log.debug(
                    "settings of %s client %s (%s %s, namespace %r, request %s)",
                    pb.ClientType.Name(command.settings.client_type), meta.client_id,
                    meta.language, meta.client_version, meta.namespace, meta.request_id,
                )  # fmt: skip
                yield self._settings_command(command.settings)
            elif kind in ("thread_stack_trace", "verify_message_result"):
                # Answers to server commands; the broker sends none of those yet.
                log.debug("client %s sent an unsolicited %s", meta.client_id, kind)
            else:
                yield svc.TelemetryCommand(
                    status=status(pb.BAD_REQUEST, f"unexpected telemetry command {kind}")
                )

    def _settings_command(self, client: pb.Settings) -> svc.TelemetryCommand:
        try:
            group: GroupPolicy | None = None
            if client.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
                group = self._group_policy(client.subscription.group.name)
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

    # ------------------------------------------------------------------ not served yet

    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        yield svc.ReceiveMessageResponse(status=_not_implemented("ReceiveMessage"))

    async def QueryAssignment(
        self, request: svc.QueryAssignmentRequest, context: Context
    ) -> svc.QueryAssignmentResponse:
        return svc.QueryAssignmentResponse(status=_not_implemented("QueryAssignment"))

    async def AckMessage(
        self, request: svc.AckMessageRequest, context: Context
    ) -> svc.AckMessageResponse:
        return svc.AckMessageResponse(status=_not_implemented("AckMessage"))

    async def ChangeInvisibleDuration(
        self, request: svc.ChangeInvisibleDurationRequest, context: Context
    ) -> svc.ChangeInvisibleDurationResponse:
        return svc.ChangeInvisibleDurationResponse(
            status=_not_implemented("ChangeInvisibleDuration")
        )

    async def ForwardMessageToDeadLetterQueue(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        return svc.ForwardMessageToDeadLetterQueueResponse(
            status=_not_implemented("ForwardMessageToDeadLetterQueue")
        )

    async def EndTransaction(
        self, request: svc.EndTransactionRequest, context: Context
    ) -> svc.EndTransactionResponse:
        return svc.EndTransactionResponse(status=_not_implemented("EndTransaction"))


class _Undecodable:
    """What the request deserializer yields for bytes that are not the request message."""

    def __init__(self, error: DecodeError) -> None:
        self.error = error


class RejectUndecodable(grpc.aio.ServerInterceptor):
    """grpc.aio answers a request its deserializer cannot parse with UNKNOWN ("Unexpected
    DecodeError"); the fault is the client's, so it gets INVALID_ARGUMENT, and only the
    handlers of served methods run with decoded messages."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        decode = handler.request_deserializer
        method = handler_call_details.method

        def deserializer(data: bytes) -> Any:
            try:
                return decode(data)
            except DecodeError as exc:
                return _Undecodable(exc)

        async def reject(context: Context, bad: _Undecodable) -> None:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{method}: undecodable request: {bad.error}"
            )

        if handler.unary_unary is not None:
            unary = handler.unary_unary

            async def unary_unary(request: Any, context: Context) -> Any:
                if isinstance(request, _Undecodable):
                    await reject(context, request)
                return await unary(request, context)

            return handler._replace(request_deserializer=deserializer, unary_unary=unary_unary)
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            async def unary_stream(request: Any, context: Context) -> AsyncIterator[Any]:
                if isinstance(request, _Undecodable):
                    await reject(context, request)
                async for response in streaming(request, context):
                    yield response

            return handler._replace(request_deserializer=deserializer, unary_stream=unary_stream)
        if handler.stream_stream is not None:
            bidi = handler.stream_stream

            async def stream_stream(requests: AsyncIterator[Any], context: Context) -> Any:
                async def checked() -> AsyncIterator[Any]:
                    async for request in requests:
                        if isinstance(request, _Undecodable):
                            await reject(context, request)
                        yield request

                async for response in bidi(checked(), context):
                    yield response

            return handler._replace(request_deserializer=deserializer, stream_stream=stream_stream)
        return handler


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
        server = grpc.aio.server(interceptors=[RejectUndecodable()])
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self.service, server)  # type: ignore[no-untyped-call]
        try:
            # grpc reports a failed bind as RuntimeError ("Failed to bind to address").
            port = server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        await server.start()
        self._server = server
        self.port = self.service.port = port
        log.info("gRPC endpoint listening on %s:%d", self.host, port)
        return port

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
