"""The ACL decision (RocketMQ's PlainPermissionManager.validate and PlainPermissionChecker, ACL
1.0 as of RocketMQ 5.3): one request, described by an ``AccessRequest``, against the rules.
No I/O here.

In order, the first that applies decides:

1. the client's address is in ``globalWhiteRemoteAddresses``: allowed;
2. no access key: refused; an unknown access key: refused;
3. the address matches the account's ``whiteRemoteAddress``: allowed;
4. the signature differs from the one the account's secret key makes: refused;
5. a send to RMQ_SYS_TRACE_TOPIC (message traces): allowed;
6. an admin account: allowed; an admin request of another account: refused;
7. each resource the request names needs its permission: the account's own for that topic or
   group, else its default topic or group permission.

Refusal messages are RocketMQ's. They name only what the request itself named (its access key,
its topic or group), never whether a topic exists: the decision runs before any lookup.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from pocketmq.broker.acl.rules import PUB, AclRules, perm_allows
from pocketmq.protocol.acl_sign import signature
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import RETRY_GROUP_TOPIC_PREFIX, TRACE_TOPIC, is_retry_topic

# Permission.ADMIN_CODE (RocketMQ 5.3), and the list forms of the topic and group updates,
# which RocketMQ leaves out of it (a hole: a plain account could create topics in bulk).
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC,
    }
)


class AclDenied(Exception):
    """A request the rules refuse; the message is RocketMQ's AclException message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessRequest:
    """What the decision needs of one request, protocol aside."""

    # The client's IP address, without the port.
    remote_host: str
    access_key: str | None
    # Base64 of the HmacSHA1 the client sent.
    signature: str | None
    # The bytes the signature covers.
    content: bytes
    request_code: int = 0
    # Topic names and %RETRY%group names -> the permission bits needed on each.
    resources: Mapping[str, int] = field(default_factory=dict)


def _printable(resource: str) -> str:
    if is_retry_topic(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic:{resource}"


def check(rules: AclRules, request: AccessRequest) -> None:
    """Allow the request, or raise.

    Raises:
        AclDenied: the rules refuse it.
    """
    host = request.remote_host
    if any(white(host) for white in rules.global_white):
        return
    if request.access_key is None:
        raise AclDenied("No accessKey is configured")
    account = rules.accounts.get(request.access_key)
    if account is None:
        raise AclDenied(f"No acl config for {request.access_key}")
    if account.white_remote_address(host):
        return
    expected = signature(request.content, account.secret_key)
    if request.signature is None or not hmac.compare_digest(
        expected.encode(), request.signature.encode()
    ):
        raise AclDenied(f"Check signature failed for accessKey={request.access_key}")
    if request.resources.get(TRACE_TOPIC) == PUB:
        return
    if account.admin:
        return
    if request.request_code in ADMIN_CODES:
        raise AclDenied(
            f"Need admin permission for request code={request.request_code}, "
            f"but accessKey={account.access_key} is not"
        )
    for resource, needed in request.resources.items():
        group = is_retry_topic(resource)
        owned = account.resource_perms.get(resource)
        if owned is None:
            default = account.default_group_perm if group else account.default_topic_perm
            if not perm_allows(needed, default):
                raise AclDenied(f"No default permission for {_printable(resource)}")
        elif not perm_allows(needed, owned):
            raise AclDenied(f"No permission for {_printable(resource)}")
