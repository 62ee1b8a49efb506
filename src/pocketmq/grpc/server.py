"""``apache.rocketmq.v2.MessagingService`` on grpc.aio, served from the broker process
(RocketMQ's "local" proxy mode): requests go straight to the in-process broker.

A thin edge, as the proxy's activities are: each RPC checks its request's fields, calls the
broker's messaging service (or its POP or transaction service) and maps the outcome. Served
here: QueryRoute, Heartbeat, SendMessage (transactional half messages included; a send's type
must be one its topic's ``message.type`` accepts), EndTransaction and NotifyClientTermination;
Telemetry (settings, and the check-backs pushed to producers) in ``telemetry``, the
consumption RPCs in ``consume_activity`` and the pull consumer's in ``pull_activity``.
Outcomes, including refused requests, travel as v2 ``Status`` values inside responses, as
RocketMQ's proxy sends them; an unexpected exception in a handler is logged and answered with
INTERNAL_SERVER_ERROR, and never takes the server down.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import grpc

from pocketmq.broker.stats import Protocol
from pocketmq.broker.status_map import PUT_STATUS_CODES
from pocketmq.broker.transaction.service import EndTransaction
from pocketmq.errors import RequestError
from pocketmq.grpc import DEFAULT_GRPC_PORT, convert
from pocketmq.grpc.acl import refusal
from pocketmq.grpc.activity import boundary
from pocketmq.grpc.calls import Admission, Context, RejectUndecodable, client_id, peer_host
from pocketmq.grpc.consume_activity import ConsumeActivity
from pocketmq.grpc.convert import status
from pocketmq.grpc.pull_activity import PullActivity
from pocketmq.grpc.telemetry import TelemetryActivity
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2 import service_pb2_grpc
from pocketmq.protocol.fields import check_message_type
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.names import is_dlq_topic, is_retry_topic
from pocketmq.protocol.topic_attributes import message_type_of, topic_message_type

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# The largest request accepted (the proxy's grpcMaxInboundMessageSize).
MAX_INBOUND_MESSAGE_BYTES = 130 * 1024 * 1024


class MessagingService(
    ConsumeActivity, PullActivity, TelemetryActivity, service_pb2_grpc.MessagingServiceServicer
):
    """Routes, clients, sends and transactions here; the rest in their activities."""

    @boundary(lambda s: svc.QueryRouteResponse(status=s))
    async def QueryRoute(
        self, request: svc.QueryRouteRequest, context: Context
    ) -> svc.QueryRouteResponse:
        cfg = self.messaging.topic(convert.check_topic(request.topic))
        return svc.QueryRouteResponse(
            status=status(),
            message_queues=convert.message_queues(cfg, self._broker_pb(), request.topic),
        )

    @boundary(lambda s: svc.HeartbeatResponse(status=s))
    async def Heartbeat(
        self, request: svc.HeartbeatRequest, context: Context
    ) -> svc.HeartbeatResponse:
        client = client_id(context)
        if not client:
            return svc.HeartbeatResponse(status=status(pb.CLIENT_ID_REQUIRED, "no client id"))
        self.renew_producer(client)
        self.renew_consumer(client)
        return svc.HeartbeatResponse(status=status())

    @boundary(lambda s: svc.NotifyClientTerminationResponse(status=s))
    async def NotifyClientTermination(
        self, request: svc.NotifyClientTerminationRequest, context: Context
    ) -> svc.NotifyClientTerminationResponse:
        client = client_id(context)
        if not client:
            return svc.NotifyClientTerminationResponse(
                status=status(pb.CLIENT_ID_REQUIRED, "no client id")
            )
        log.debug("client %s terminated", client)
        self.renewer.forget_client(client)
        self.broker.producers.unregister_all(client)
        return svc.NotifyClientTerminationResponse(status=status())

    # ------------------------------------------------------------------ send

    @boundary(lambda s: svc.SendMessageResponse(status=s))
    async def SendMessage(
        self, request: svc.SendMessageRequest, context: Context
    ) -> svc.SendMessageResponse:
        if not request.messages:
            return svc.SendMessageResponse(status=status(pb.BAD_REQUEST, "no message to send"))
        born_host = peer_host(context)
        # Entries are filled where they are: built apart, each would be copied in.
        response = svc.SendMessageResponse()
        entries = response.entries
        for msg in request.messages:
            await self._send_one(msg, born_host, entries.add())
        if len({e.status.code for e in entries}) == 1:
            response.status.CopyFrom(entries[0].status)
        else:
            response.status.CopyFrom(
                status(pb.MULTIPLE_RESULTS, "the messages had different outcomes")
            )
        return response

    async def _send_one(
        self, message: pb.Message, born_host: tuple[str, int], entry: svc.SendResultEntry
    ) -> None:
        """Store one message of a SendMessage and fill its result ``entry``."""
        entry.message_id = message.system_properties.message_id
        try:
            msg = convert.to_message_ext(message, self._limits, born_host)
            cfg = self.messaging.topic_for_send(msg.topic)
            if self.broker.config.enable_topic_message_type_check and not (
                is_retry_topic(msg.topic) or is_dlq_topic(msg.topic)
            ):
                check_message_type(
                    msg.topic, topic_message_type(cfg.attributes), message_type_of(msg.properties)
                )
            msg.queue_id = convert.queue_for(msg, cfg.write_queue_nums, next(self._spread))
            msg.store_host = self.messaging.store_host
            result = await self.messaging.send(msg, protocol=Protocol.GRPC)
        except RequestError as exc:
            entry.status.CopyFrom(convert.status_of_error(exc))
            return
        code, remark = PUT_STATUS_CODES[result.status]
        if not result.ok:
            entry.status.CopyFrom(
                convert.status_of_response_code(code, f"{remark} {result.detail}".strip())
            )
            return
        message_id = msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        half = message.system_properties.message_type == pb.TRANSACTION
        convert.set_ok(entry.status)
        entry.message_id = message_id
        # RocketMQ answers every send with a transaction id (the message id); a half's is its
        # offset message id, which EndTransaction reads (convert.half_offset).
        entry.transaction_id = result.msg_id if half else message_id
        entry.offset = result.queue_offset

    # ------------------------------------------------------------------ transactions

    @boundary(lambda s: svc.EndTransactionResponse(status=s))
    async def EndTransaction(
        self, request: svc.EndTransactionRequest, context: Context
    ) -> svc.EndTransactionResponse:
        """Commit or roll back a half message (the producer's or a check-back's answer). The
        producer group is the topic, as for the half (``convert.to_message_ext``); a resolution
        left unspecified is RocketMQ's UNKNOWN: the half stays, to be checked back."""
        end = EndTransaction(
            producer_group=convert.check_topic(request.topic),
            commit_log_offset=convert.half_offset(request.transaction_id),
            queue_offset=None,
            resolution=convert.resolution(request.resolution),
            from_check=convert.from_check(request.source),
            msg_id=convert.check_message_id(request.message_id),
        )
        await self.messaging.end_transaction(end)
        return svc.EndTransactionResponse(status=status())


class GrpcService:
    """The gRPC endpoint of one broker: ``start()`` binds and serves, ``stop()`` ends calls
    in flight after a grace period."""

    def __init__(self, broker: Broker, host: str, port: int = DEFAULT_GRPC_PORT) -> None:
        self.host = host
        self.port = port
        self.service = MessagingService(broker, broker.config.broker_ip1)
        acl = broker.acl
        self._admit: Admission | None = None if acl is None else partial(refusal, acl)
        self._server: grpc.aio.Server | None = None

    async def start(self) -> int:
        """Bind and serve; returns the bound port (a free one when asked for 0).

        Raises:
            OSError: the address cannot be bound.
        """
        server = grpc.aio.server(
            interceptors=[RejectUndecodable(self._admit)],
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
