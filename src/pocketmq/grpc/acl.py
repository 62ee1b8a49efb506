"""What a 5.x gRPC request asks of the broker's ACL (RocketMQ's PlainAccessResource.parse for a
gRPC message, 5.3, and its AuthorizationHeader). No I/O here.

A client signs the ``x-mq-date-time`` header of each call and sends::

    authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
                   Signature=<hex of HmacSHA1(secretKey, x-mq-date-time)>

A malformed header is refused before any rule is read. Each request message (each message of
the Telemetry stream too) needs its resources, groups as their retry topics:

===================================  =======================================================
request                              needs
===================================  =======================================================
QueryRoute                           the topic: PUB or SUB
Heartbeat (consumers)                the group: SUB
SendMessage                          the topic (one for all its messages): PUB
EndTransaction                       the topic: PUB
ReceiveMessage, QueryAssignment,     the group and the topic: SUB
AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue
Telemetry settings                   published topics: PUB; the subscription's group and
                                     topics: SUB
NotifyClientTermination              the group, when named: SUB
PullMessage, UpdateOffset,           the group (when named) and the topic: SUB (RocketMQ
GetOffset, QueryOffset               leaves these out of ACL 1.0; read like a 4.x pull here)
===================================  =======================================================
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from pocketmq.broker.acl import AccessRequest, AclDenied, AclService
from pocketmq.broker.acl.rules import ANY, PUB, SUB
from pocketmq.grpc.calls import Context, client_meta, peer_host
from pocketmq.grpc.convert import wrap
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.names import retry_topic


def parse_authorization(header: str) -> tuple[str | None, str | None]:
    """The access key and the signature (as Base64, as RocketMQ compares them) of an
    ``authorization`` header; (None, None) when there is none.

    Raises:
        AclDenied: the header is malformed (RocketMQ's DecoderException messages).
    """
    if not header:
        return None, None
    method, sep, rest = header.partition(" ")
    if not sep or not method:
        raise AclDenied("authorization header is incorrect")
    access_key: str | None = None
    signature: str | None = None
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AclDenied("authorization keyValues length is incorrect, actual length=1")
        if key == "Credential":
            access_key = value.split("/")[0]
        elif key == "Signature":
            try:
                signature = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            except ValueError as exc:
                raise AclDenied(f"authorization signature is not hexadecimal: {exc}") from exc
    return access_key, signature


def _resources(request: Any) -> dict[str, int]:
    needed: dict[str, int] = {}

    def topic(resource: pb.Resource, perm: int) -> None:
        needed[wrap(resource)] = perm

    def group(resource: pb.Resource) -> None:
        needed[retry_topic(wrap(resource))] = SUB

    if isinstance(request, svc.QueryRouteRequest):
        topic(request.topic, ANY)
    elif isinstance(request, svc.HeartbeatRequest):
        if request.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise AclDenied("Consumer heartbeat doesn't have group")
            group(request.group)
    elif isinstance(request, svc.SendMessageRequest):
        if not request.messages:
            raise AclDenied("SendMessageRequest, messageCount is zero")
        first = request.messages[0].topic
        if any(m.topic != first for m in request.messages):
            raise AclDenied("SendMessageRequest, messages' topic is not consistent")
        topic(first, PUB)
    elif isinstance(request, svc.EndTransactionRequest):
        topic(request.topic, PUB)
    elif isinstance(
        request,
        svc.ReceiveMessageRequest
        | svc.PullMessageRequest
        | svc.UpdateOffsetRequest
        | svc.GetOffsetRequest,
    ):
        group(request.group)
        topic(request.message_queue.topic, SUB)
    elif isinstance(request, svc.QueryOffsetRequest):
        topic(request.message_queue.topic, SUB)
    elif isinstance(
        request,
        svc.AckMessageRequest
        | svc.ChangeInvisibleDurationRequest
        | svc.ForwardMessageToDeadLetterQueueRequest
        | svc.QueryAssignmentRequest,
    ):
        group(request.group)
        topic(request.topic, SUB)
    elif isinstance(request, svc.NotifyClientTerminationRequest):
        if request.group.name.strip():
            group(request.group)
    elif isinstance(request, svc.TelemetryCommand) and request.HasField("settings"):
        _settings_resources(request.settings, topic, group)
    return needed


def _settings_resources(
    settings: pb.Settings,
    topic: Callable[[pb.Resource, int], None],
    group: Callable[[pb.Resource], None],
) -> None:
    if settings.HasField("publishing"):
        for resource in settings.publishing.topics:
            topic(resource, PUB)
    elif settings.HasField("subscription"):
        group(settings.subscription.group)
        for entry in settings.subscription.subscriptions:
            topic(entry.topic, SUB)
    else:
        raise AclDenied("settings command doesn't have publishing or subscription")


def grpc_access(
    request: Any, *, authorization: str, date_time: str, remote_host: str
) -> AccessRequest:
    """The ACL's view of one gRPC request message.

    Raises:
        AclDenied: a malformed authorization header, or a request RocketMQ refuses to map.
    """
    access_key, signature = parse_authorization(authorization)
    return AccessRequest(
        remote_host=remote_host,
        access_key=access_key,
        signature=signature,
        content=date_time.encode("utf-8"),
        resources=_resources(request),
    )


def refusal(acl: AclService, request: Any, context: Context) -> str | None:
    """None when the broker's ACL allows this request of this call, else why not."""
    meta = client_meta(context)
    try:
        access = grpc_access(
            request,
            authorization=meta.authorization,
            date_time=meta.date_time,
            remote_host=peer_host(context)[0],
        )
    except AclDenied as exc:
        return str(exc)
    return acl.refusal(access)
