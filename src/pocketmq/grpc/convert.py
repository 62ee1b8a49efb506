"""apache.rocketmq.v2 messages <-> pocketmq models, for the gRPC endpoint. No I/O here.

- A 5.x ``Message`` becomes a 4.x ``MessageExt``: the tag goes to ``TAGS``, keys to ``KEYS``
  (space separated), the client's message id to ``UNIQ_KEY``, a message group to
  ``__SHARDINGKEY`` and a delivery timestamp to ``TIMER_DELIVER_MS`` (which the broker's timer
  service then honours), so 4.x consumers read what 5.x producers sent.
- Remoting response codes map onto v2 ``Code`` values in one table, as RocketMQ's proxy does;
  a field refused by ``protocol.fields`` gets the v2 code of its kind (BAD_REQUEST by default).
- A TRANSACTION message becomes a half message: the PREPARED sys flag, ``TRAN_MSG`` and, as
  for every 5.x send, the topic as its producer group (``PGROUP``): 5.x producers name no
  group, so RocketMQ's proxy registers them, and finds them for check-backs, by topic.
- A half's transaction id is its offset message id (see ``half_offset``).
- Topic configs become ``MessageQueue`` lists for QueryRoute, each queue accepting the message
  types its topic's ``message.type`` allows (``accept_message_types``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.broker.filtering import FilterNotSupported
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import ProtocolError, RequestError
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import FieldError, FieldKind
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, decode_offset_msg_id
from pocketmq.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    RETRY_GROUP_TOPIC_PREFIX,
    TAG_SEPARATOR,
    SubscriptionData,
    is_readable,
    is_system_topic,
    is_writeable,
    topic_error,
)
from pocketmq.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, java_string_hash
from pocketmq.protocol.topic_attributes import TopicMessageType, accepted_types, topic_message_type

# RocketMQ proxy's ResponseBuilder: remoting outcome -> v2 status code.
RESPONSE_CODES: dict[int, pb.Code] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: pb.MESSAGE_CORRUPTED,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    # A transaction's conflicting end: the client's mistake, not the server's.
    ResponseCode.ILLEGAL_OPERATION: pb.BAD_REQUEST,
}

# A request field refused by protocol.fields -> the v2 code the proxy's validators answer.
FIELD_CODES: dict[FieldKind, pb.Code] = {
    FieldKind.TOPIC: pb.ILLEGAL_TOPIC,
    FieldKind.GROUP: pb.ILLEGAL_CONSUMER_GROUP,
    FieldKind.OFFSET: pb.ILLEGAL_OFFSET,
    FieldKind.INVISIBLE_TIME: pb.ILLEGAL_INVISIBLE_TIME,
    FieldKind.BODY_SIZE: pb.MESSAGE_BODY_TOO_LARGE,
    FieldKind.BODY_EMPTY: pb.MESSAGE_BODY_EMPTY,
    FieldKind.MESSAGE_TYPE: pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
}

# A Timestamp's seconds above this cannot be seconds (it is the year 5138): the 5.1.2 Python
# client writes epoch milliseconds into delivery_timestamp.seconds.
_SECONDS_LIMIT = 10**11

# Message types the endpoint serves; a topic may accept fewer (accept_message_types).
ACCEPTED_MESSAGE_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
_V2_TYPES: dict[TopicMessageType, pb.MessageType] = {
    TopicMessageType.NORMAL: pb.NORMAL,
    TopicMessageType.FIFO: pb.FIFO,
    TopicMessageType.DELAY: pb.DELAY,
    TopicMessageType.TRANSACTION: pb.TRANSACTION,
}
# The proxy's maxTransactionRecoverySecond: a half may ask not to be checked for at most 1 h.
MAX_TRANSACTION_RECOVERY_S = 3600

# Property names the broker sets itself; a user property may not overwrite them.
RESERVED_PROPERTIES = frozenset(
    value
    for name, value in vars(MessageConst).items()
    if not name.startswith("_") and isinstance(value, str)
)


class GrpcRequestError(RequestError):
    """A request cannot be served as sent; becomes a response status with this v2 code."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, message)
        self.grpc_code = code


def enum_name(enum: EnumTypeWrapper, value: int) -> str:
    """The name of an enum value, or its number: proto3 enums are open, so a client may send a
    number no name stands for (and ``Name`` would raise)."""
    return enum.Name(value) if value in enum.values() else str(value)


def status(code: pb.Code = pb.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)


def set_ok(target: pb.Status) -> None:
    """``status()`` written into a response's own Status, which a hot path fills in place."""
    target.code = pb.OK
    target.message = "OK"


def status_of_error(exc: RequestError) -> pb.Status:
    """The v2 status of a failed request, whichever layer refused it."""
    if isinstance(exc, GrpcRequestError):
        return status(exc.grpc_code, exc.remark)
    if isinstance(exc, FieldError):
        return status(FIELD_CODES.get(exc.kind, pb.BAD_REQUEST), exc.remark)
    return status(RESPONSE_CODES.get(exc.code, pb.INTERNAL_SERVER_ERROR), exc.remark)


def status_of_response_code(code: int, remark: str) -> pb.Status:
    return status(RESPONSE_CODES.get(code, pb.INTERNAL_SERVER_ERROR), remark or "OK")


def timestamp_ms(ts: Timestamp) -> int:
    """Epoch milliseconds of a Timestamp, reading milliseconds in ``seconds`` as such."""
    if ts.seconds > _SECONDS_LIMIT:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def timestamp_now() -> Timestamp:
    ts = Timestamp()
    ts.GetCurrentTime()
    return ts


def duration_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def subscription_data(topic: str, expression: pb.FilterExpression) -> SubscriptionData:
    """A FilterExpression as a subscription (GrpcConverter.buildExpressionType: SQL is SQL92,
    TAG and an unspecified type are TAG); the messaging service compiles it.

    Raises:
        GrpcRequestError: ILLEGAL_FILTER_EXPRESSION for a type no name stands for.
    """
    if expression.type == pb.SQL:
        return SubscriptionData(topic, expression.expression, EXPRESSION_TYPE_SQL92)
    if expression.type not in (pb.TAG, pb.FILTER_TYPE_UNSPECIFIED):
        raise GrpcRequestError(
            pb.ILLEGAL_FILTER_EXPRESSION, f"filter type {expression.type} is unknown"
        )
    return SubscriptionData(topic, expression.expression, EXPRESSION_TYPE_TAG)


@contextlib.contextmanager
def filter_refusals() -> Iterator[None]:
    """The v2 codes of a filter expression the messaging service refuses: one that does not
    compile is ILLEGAL_FILTER_EXPRESSION (the proxy's code for a filter it cannot build),
    SQL92 on a broker that does not filter by properties UNSUPPORTED."""
    try:
        yield
    except FilterNotSupported as exc:
        raise GrpcRequestError(pb.UNSUPPORTED, exc.remark) from exc
    except RequestError as exc:
        if exc.code != ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            raise
        raise GrpcRequestError(pb.ILLEGAL_FILTER_EXPRESSION, exc.remark) from exc


def endpoints(host: str, port: int) -> pb.Endpoints:
    try:
        scheme = pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def accept_message_types(cfg: TopicConfig) -> list[pb.MessageType]:
    """The message types a topic's queues accept, from its ``message.type`` attribute (every
    type served without one); a topic of type UNSPECIFIED accepts none and says so with
    MESSAGE_TYPE_UNSPECIFIED, as RocketMQ's route does."""
    types = [_V2_TYPES[t] for t in accepted_types(topic_message_type(cfg.attributes))]
    return types or [pb.MESSAGE_TYPE_UNSPECIFIED]


def message_queues(
    cfg: TopicConfig, broker: pb.Broker, topic: pb.Resource
) -> list[pb.MessageQueue]:
    """The queues of a topic on one broker. Queue ids below both the read and the write queue
    numbers can do both (when the topic allows both); the rest only what their number allows."""
    readable = is_readable(cfg.perm)
    writable = is_writeable(cfg.perm)
    reads = cfg.read_queue_nums if readable else 0
    writes = cfg.write_queue_nums if writable else 0
    accepts = accept_message_types(cfg)
    queues = []
    for queue_id in range(max(reads, writes)):
        if queue_id < reads and queue_id < writes:
            perm = pb.READ_WRITE
        elif queue_id < reads:
            perm = pb.READ
        else:
            perm = pb.WRITE
        queues.append(
            pb.MessageQueue(
                topic=topic,
                id=queue_id,
                permission=perm,
                broker=broker,
                accept_message_types=accepts,
            )
        )
    return queues


# A namespace prefixes the topics and groups of its clients (RocketMQ's NamespaceUtil): a 4.x
# client with that namespace writes the same names itself, so both protocols meet.
NAMESPACE_SEPARATOR = "%"
_GROUP_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


def wrap(resource: pb.Resource) -> str:
    """The broker's name of a resource: ``namespace%name``, ``%RETRY%namespace%group`` for
    retry and DLQ topics, the name alone without a namespace or for system topics."""
    name, namespace = resource.name, resource.resource_namespace
    if not namespace or not name or is_system_topic(name):
        return name
    for prefix in _GROUP_PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            if rest.startswith(namespace + NAMESPACE_SEPARATOR):
                return name
            return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}"
    if name.startswith(namespace + NAMESPACE_SEPARATOR):
        return name
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}"


def check_topic(resource: pb.Resource) -> str:
    """The broker's name of a request's topic (see ``wrap``).

    Raises:
        GrpcRequestError: ILLEGAL_TOPIC for a blank or invalid name.
    """
    name = wrap(resource)
    err = topic_error(name)
    if err is not None:
        raise GrpcRequestError(pb.ILLEGAL_TOPIC, err)
    return name


def _check_property_text(text: str, code: pb.Code, what: str) -> None:
    # The 4.x properties string uses these two characters as separators.
    if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
        raise GrpcRequestError(code, f"{what} {text!r} contains a control character")


@dataclass(frozen=True, slots=True)
class SendLimits:
    max_body_size: int


def _body(msg: pb.Message, limits: SendLimits) -> bytes:
    body = msg.body
    if msg.system_properties.body_encoding == pb.GZIP:
        # Stored uncompressed: 4.x consumers know zlib only as the COMPRESSED sysFlag.
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, limits.max_body_size + 1)
        except zlib.error as exc:
            raise GrpcRequestError(pb.MESSAGE_CORRUPTED, f"bad gzip body: {exc}") from exc
    if not body:
        raise GrpcRequestError(pb.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > limits.max_body_size:
        raise GrpcRequestError(
            pb.MESSAGE_BODY_TOO_LARGE,
            f"message body is larger than {limits.max_body_size} bytes",
        )
    return body


def _properties(msg: pb.Message) -> dict[str, str]:
    sp = msg.system_properties
    props: dict[str, str] = {}
    for name, value in msg.user_properties.items():
        if not name or name in RESERVED_PROPERTIES:
            raise GrpcRequestError(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property name {name!r} is reserved or blank"
            )
        _check_property_text(name, pb.ILLEGAL_MESSAGE_PROPERTY_KEY, "property name")
        _check_property_text(value, pb.ILLEGAL_MESSAGE_PROPERTY_KEY, "property value")
        props[name] = value
    if sp.HasField("tag"):
        if not sp.tag.strip() or TAG_SEPARATOR in sp.tag:
            raise GrpcRequestError(pb.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is blank or has ||")
        _check_property_text(sp.tag, pb.ILLEGAL_MESSAGE_TAG, "tag")
        props[MessageConst.TAGS] = sp.tag
    if sp.keys:
        for key in sp.keys:
            if not key.strip():
                raise GrpcRequestError(pb.ILLEGAL_MESSAGE_KEY, "a message key is blank")
            _check_property_text(key, pb.ILLEGAL_MESSAGE_KEY, "key")
        props[MessageConst.KEYS] = " ".join(sp.keys)
    props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = check_message_id(sp.message_id)
    return props


def check_message_id(message_id: str) -> str:
    """A message id a client sends (its message's, or the one an EndTransaction names).

    Raises:
        GrpcRequestError: ILLEGAL_MESSAGE_ID for a blank id or a control character.
    """
    if not message_id:
        raise GrpcRequestError(pb.ILLEGAL_MESSAGE_ID, "message id is blank")
    _check_property_text(message_id, pb.ILLEGAL_MESSAGE_ID, "message id")
    return message_id


def _check_type(sp: pb.SystemProperties) -> None:
    """The message type must agree with the properties that make it that type."""
    has_group = sp.HasField("message_group")
    has_time = sp.HasField("delivery_timestamp")
    kind = sp.message_type
    if kind not in ACCEPTED_MESSAGE_TYPES:
        name = enum_name(pb.MessageType, kind)
        raise GrpcRequestError(pb.UNSUPPORTED, f"message type {name} is not supported")
    if (kind == pb.FIFO) != has_group or (kind == pb.DELAY) != has_time:
        raise GrpcRequestError(
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"a {pb.MessageType.Name(kind)} message "
            f"{'has' if has_group else 'lacks'} a message group and "
            f"{'has' if has_time else 'lacks'} a delivery timestamp",
        )
    if has_group:
        if not sp.message_group.strip():
            raise GrpcRequestError(pb.ILLEGAL_MESSAGE_GROUP, "message group is blank")
        _check_property_text(sp.message_group, pb.ILLEGAL_MESSAGE_GROUP, "message group")


def to_message_ext(msg: pb.Message, limits: SendLimits, born_host: tuple[str, int]) -> MessageExt:
    """The 4.x message a producer's 5.x message is stored as; queue_id is left to the caller
    (see ``queue_for``).

    Raises:
        GrpcRequestError: the message breaks a protocol rule; the code says which.
    """
    sp = msg.system_properties
    _check_type(sp)
    props = _properties(msg)
    if sp.HasField("message_group"):
        props[MessageConst.SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props[MessageConst.TIMER_DELIVER_MS] = str(timestamp_ms(sp.delivery_timestamp))
    topic = check_topic(msg.topic)
    props[MessageConst.PRODUCER_GROUP] = topic
    sys_flag = 0
    if sp.message_type == pb.TRANSACTION:
        sys_flag = SysFlag.TRANSACTION_PREPARED_TYPE
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(
                _recovery_s(sp.orphaned_transaction_recovery_duration)
            )
    return MessageExt(
        topic=topic,
        body=_body(msg, limits),
        properties=props,
        born_timestamp=timestamp_ms(sp.born_timestamp),
        born_host=born_host,
        sys_flag=sys_flag,
    )


def _recovery_s(d: Duration) -> int:
    seconds = d.seconds
    if not 0 <= seconds <= MAX_TRANSACTION_RECOVERY_S:
        raise GrpcRequestError(
            pb.BAD_REQUEST,
            f"orphaned_transaction_recovery_duration of {seconds} s is illegal: "
            f"0..{MAX_TRANSACTION_RECOVERY_S} s",
        )
    return seconds


# An EndTransaction's resolution -> the sys flag of RocketMQ's END_TRANSACTION. An unspecified
# one is the proxy's TransactionStatus.UNKNOWN: no decision yet, the half waits for its check.
_RESOLUTIONS: dict[int, int] = {
    pb.COMMIT: SysFlag.TRANSACTION_COMMIT_TYPE,
    pb.ROLLBACK: SysFlag.TRANSACTION_ROLLBACK_TYPE,
    pb.TRANSACTION_RESOLUTION_UNSPECIFIED: SysFlag.TRANSACTION_NOT_TYPE,
}


def resolution(value: int) -> int:
    """The transaction sys flag of an EndTransaction's resolution.

    Raises:
        GrpcRequestError: BAD_REQUEST for a number no resolution stands for.
    """
    try:
        return _RESOLUTIONS[value]
    except KeyError:
        raise GrpcRequestError(
            pb.BAD_REQUEST, f"transaction resolution {value} is unknown"
        ) from None


def from_check(source: int) -> bool:
    """Whether an EndTransaction answers a check-back (SOURCE_SERVER_CHECK); an unspecified
    source is the producer's own, as the proxy reads it.

    Raises:
        GrpcRequestError: BAD_REQUEST for a number no source stands for.
    """
    if source not in pb.TransactionSource.values():
        raise GrpcRequestError(pb.BAD_REQUEST, f"transaction source {source} is unknown")
    return source == pb.SOURCE_SERVER_CHECK


def half_offset(transaction_id: str) -> int:
    """The CommitLog offset of the half message a transaction id stands for.

    A half's transaction id is its offset message id (store host and CommitLog offset, as
    ``create_offset_msg_id`` writes it), where RocketMQ's proxy answers the client's message id
    and keeps the half's offsets in memory, keyed by it, until the EndTransaction comes (or
    30 s pass). The offset in the id itself needs no such table: the transaction id of a half
    sent before a broker restart, or of a check-back, still finds its half, and the broker's
    transaction service checks that the record there is that half.

    Raises:
        GrpcRequestError: INVALID_TRANSACTION_ID for a blank id or one that is not ours.
    """
    if not transaction_id.strip():
        raise GrpcRequestError(pb.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    try:
        _, phy_offset = decode_offset_msg_id(transaction_id)
    except ProtocolError as exc:
        raise GrpcRequestError(
            pb.INVALID_TRANSACTION_ID, f"transaction id {transaction_id!r} is not one of ours"
        ) from exc
    if phy_offset < 0:
        raise GrpcRequestError(
            pb.INVALID_TRANSACTION_ID, f"transaction id {transaction_id!r} has a negative offset"
        )
    return phy_offset


def queue_for(msg: MessageExt, write_queue_nums: int, spread: int) -> int:
    """The queue a message goes to. The 5.x client sends no queue id: a message group is
    hashed (Java's String.hashCode, as RocketMQ's proxy selects by sharding key) so that a
    group always lands on one queue and stays ordered; other messages take ``spread``."""
    group = msg.properties.get(MessageConst.SHARDING_KEY)
    if group is None:
        return spread % write_queue_nums
    return abs(java_string_hash(group)) % write_queue_nums
