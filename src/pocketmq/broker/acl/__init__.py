"""RocketMQ's ACL 1.0 (plain_acl.yml): access keys, HmacSHA1 signatures, per-account topic and
group permissions, white-listed addresses. Off unless the broker's ``aclEnable`` is true.

``rules`` (the file's model), ``addresses`` (address patterns), ``access`` (the decision) and
``remoting`` (what a remoting request needs) do no I/O; ``service`` reads and watches the file
and checks requests in front of the remoting dispatcher; the gRPC edge maps its requests in
``pocketmq.grpc.acl``.
"""

from pocketmq.broker.acl.access import AccessRequest, AclDenied, check
from pocketmq.broker.acl.rules import AclRules, rules_from_document
from pocketmq.broker.acl.service import AclService

__all__ = ["AccessRequest", "AclDenied", "AclRules", "AclService", "check", "rules_from_document"]
