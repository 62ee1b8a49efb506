"""The gRPC side of the ACL: the 5.x ``authorization`` header and what each request needs."""

from __future__ import annotations

import hashlib
import hmac

import pytest
import yaml

from pocketmq.broker.acl import AclDenied, check, rules_from_document
from pocketmq.broker.acl.rules import ANY, PUB, SUB
from pocketmq.grpc.acl import grpc_access, parse_authorization
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc

RULES = rules_from_document(
    yaml.safe_load(
        """
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    topicPerms: [Orders=PUB, Audit=SUB]
    groupPerms: [Billing=SUB]
"""
    )
)
DATE = "20261124T033000Z"


def authorization(ak: str, sk: str, date: str = DATE) -> str:
    """The header as rocketmq-python-client 5.1.2 writes it (util/signature.py)."""
    sign = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
    return f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sign}"


def refusal(request: object, header: str, date: str = DATE) -> str | None:
    try:
        check(
            RULES,
            grpc_access(request, authorization=header, date_time=date, remote_host="10.0.0.1"),
        )
    except AclDenied as exc:
        return str(exc)
    return None


def send(topic: str) -> svc.SendMessageRequest:
    return svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic))])


def test_the_official_clients_header_is_accepted() -> None:
    assert refusal(send("Orders"), authorization("RocketMQ", "12345678")) is None


def test_wrong_secret_unknown_key_and_replayed_date_are_refused() -> None:
    assert refusal(send("Orders"), authorization("RocketMQ", "wrong-secret")) == (
        "Check signature failed for accessKey=RocketMQ"
    )
    assert refusal(send("Orders"), authorization("Nobody1", "12345678")) == (
        "No acl config for Nobody1"
    )
    # Empty credentials, as the client sends without any: an empty access key.
    assert refusal(send("Orders"), authorization("", "")) == "No acl config for "
    # The signature covers the date-time header: another date, another signature.
    header = authorization("RocketMQ", "12345678")
    assert refusal(send("Orders"), header, date="20261124T033001Z") == (
        "Check signature failed for accessKey=RocketMQ"
    )


@pytest.mark.parametrize(
    ("header", "complaint"),
    [
        ("MQv2-HMAC-SHA1", "authorization header is incorrect"),
        ("MQv2-HMAC-SHA1 Credential", "keyValues length is incorrect"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Signature=zz", "not hexadecimal"),
    ],
)
def test_malformed_headers_are_refused(header: str, complaint: str) -> None:
    assert complaint in (refusal(send("Orders"), header) or "")


def test_credential_scope_after_a_slash_is_ignored() -> None:
    access, _ = parse_authorization("MQv2-HMAC-SHA1 Credential=RocketMQ/2026/x, Signature=00")
    assert access == "RocketMQ"


def test_requests_need_their_topics_and_groups() -> None:
    header = authorization("RocketMQ", "12345678")
    assert refusal(send("Audit"), header) == "No permission for topic:Audit"
    receive = svc.ReceiveMessageRequest(
        group=pb.Resource(name="Billing"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Audit")),
    )
    assert refusal(receive, header) is None
    other_group = svc.ReceiveMessageRequest(
        group=pb.Resource(name="Other"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Audit")),
    )
    assert refusal(other_group, header) == "No default permission for group:Other"
    route = svc.QueryRouteRequest(topic=pb.Resource(name="Orders"))
    assert refusal(route, header) is None  # PUB is enough to route


def test_mixed_topics_and_telemetry_without_pub_sub_are_refused() -> None:
    header = authorization("RocketMQ", "12345678")
    mixed = svc.SendMessageRequest(
        messages=[pb.Message(topic=pb.Resource(name=t)) for t in ("Orders", "Audit")]
    )
    assert refusal(mixed, header) == "SendMessageRequest, messages' topic is not consistent"
    bare = svc.TelemetryCommand(settings=pb.Settings())
    assert refusal(bare, header) == "settings command doesn't have publishing or subscription"


def test_resources_of_telemetry_settings_and_namespaces() -> None:
    settings = pb.Settings(
        subscription=pb.Subscription(
            group=pb.Resource(name="Billing", resource_namespace="ns"),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="Audit"))],
        )
    )
    access = grpc_access(
        svc.TelemetryCommand(settings=settings),
        authorization="",
        date_time=DATE,
        remote_host="10.0.0.1",
    )
    assert access.access_key is None
    assert access.resources == {"%RETRY%ns%Billing": SUB, "Audit": SUB}
    route = grpc_access(
        svc.QueryRouteRequest(topic=pb.Resource(name="T")),
        authorization="",
        date_time=DATE,
        remote_host="10.0.0.1",
    )
    assert route.resources == {"T": ANY}
    publish = grpc_access(
        svc.TelemetryCommand(
            settings=pb.Settings(publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
        ),
        authorization="",
        date_time=DATE,
        remote_host="10.0.0.1",
    )
    assert publish.resources == {"T": PUB}
