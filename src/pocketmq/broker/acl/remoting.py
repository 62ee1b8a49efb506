"""What a remoting request asks of the ACL (RocketMQ's PlainAccessResource.parse for a
RemotingCommand, 5.3): its access key, signature and signed content, and the resources it
needs. No I/O here.

=================================  ===============================================
request                            needs
=================================  ===============================================
SEND_MESSAGE (10)                  ``topic``: PUB (a retry topic: SUB)
SEND_MESSAGE_V2 (310), SEND_BATCH  ``b`` (the topic): PUB (a retry topic: SUB)
(320)
CONSUMER_SEND_MSG_BACK (36)        the retry topic of ``group``: SUB
PULL_MESSAGE (11), LITE_PULL       ``topic``: SUB, and the group ``consumerGroup``: SUB
(361, read like a pull)
QUERY_MESSAGE (12)                 ``topic``: SUB
HEART_BEAT (34)                    each consumer's group and subscribed topics: SUB
UNREGISTER_CLIENT (35),            the group ``consumerGroup``: SUB
GET_CONSUMER_LIST_BY_GROUP (38)
UPDATE_CONSUMER_OFFSET (15)        the group ``consumerGroup`` and ``topic``: SUB
anything else                      no resource (a valid signature; admin requests: an admin)
=================================  ===============================================
"""

from __future__ import annotations

from typing import Any

from pocketmq.broker.acl.access import AccessRequest, AclDenied
from pocketmq.broker.acl.rules import PUB, SUB
from pocketmq.errors import ProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.acl_sign import ACCESS_KEY, SIGNATURE, signing_content
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import is_retry_topic, retry_topic
from pocketmq.protocol.remoting import RemotingCommand

_SEND_V2 = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
_PULL = frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE})
_GROUP_ONLY = frozenset({RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP})


def _heartbeat_resources(body: bytes, resources: dict[str, int]) -> None:
    try:
        data: Any = json_body.loads(body) if body else {}
    except ProtocolError as exc:
        raise AclDenied(f"heartbeat body: {exc}") from exc
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers if isinstance(consumers, list) else ():
        if not isinstance(consumer, dict):
            continue
        group = consumer.get("groupName")
        if isinstance(group, str):
            resources[retry_topic(group)] = SUB
        subscriptions = consumer.get("subscriptionDataSet")
        for sub in subscriptions if isinstance(subscriptions, list) else ():
            topic = sub.get("topic") if isinstance(sub, dict) else None
            if isinstance(topic, str):
                resources[topic] = SUB


def _resources(cmd: RemotingCommand) -> dict[str, int]:
    fields = cmd.ext_fields
    code = cmd.code
    resources: dict[str, int] = {}

    def need(name: str | None, perm: int, *, group: bool = False) -> None:
        # A field the request leaves out names nothing (RocketMQ skips a null resource).
        if name is not None:
            resources[retry_topic(name) if group else name] = perm

    if code == RequestCode.SEND_MESSAGE or code in _SEND_V2:
        topic = fields.get("topic" if code == RequestCode.SEND_MESSAGE else "b")
        need(topic, SUB if topic is not None and is_retry_topic(topic) else PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        need(fields.get("group"), SUB, group=True)
    elif code in _PULL:
        need(fields.get("topic"), SUB)
        need(fields.get("consumerGroup"), SUB, group=True)
    elif code == RequestCode.QUERY_MESSAGE:
        need(fields.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        _heartbeat_resources(cmd.body, resources)
    elif code in _GROUP_ONLY:
        need(fields.get("consumerGroup"), SUB, group=True)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        need(fields.get("consumerGroup"), SUB, group=True)
        need(fields.get("topic"), SUB)
    return resources


def remoting_access(cmd: RemotingCommand, remote_host: str) -> AccessRequest:
    """The ACL's view of a remoting request from remote_host (an IP address, no port).

    Raises:
        AclDenied: the request's body cannot be read where the resources are in it.
    """
    fields = cmd.ext_fields
    return AccessRequest(
        remote_host=remote_host,
        access_key=fields.get(ACCESS_KEY),
        signature=fields.get(SIGNATURE),
        content=signing_content(fields, cmd.body, version=cmd.version),
        request_code=cmd.code,
        resources=_resources(cmd),
    )
