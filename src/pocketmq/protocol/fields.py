"""Request fields checked at the protocol edge: one validator per field kind, with RocketMQ's
limits and response codes, for the remoting handlers and the gRPC servicer alike.

Two layers, so each rule is written once:

- ``check_*(value, ...)`` validate a value already parsed (a gRPC field, a JSON body member);
- the getters named after their kind (``queue_nums(cmd, "readQueueNums", 8)``) read a remoting
  header field with ``protocol.headers`` and validate it.

A refused field raises :class:`FieldError`, a ``RequestError`` whose remark names the field,
the value and what would be accepted, and whose ``kind`` lets the gRPC edge pick its own code.
The codes follow RocketMQ:

- a header field that is not a number, or does not fit its Java type (``int`` or ``long``),
  is SYSTEM_ERROR, as RocketMQ's header decoding fails with a RemotingCommandException;
- a number outside its field's domain is INVALID_PARAMETER (the code of RocketMQ's broker for
  a bad queue id, topic or group name), except a permission, which is NO_PERMISSION
  (``Validators.checkTopicConfig``), and a body size, which is MESSAGE_ILLEGAL.

Booleans are read as Java's ``Boolean.parseBoolean`` does (``protocol.headers.get_bool``):
anything but "true" is false, so no boolean is ever refused. No I/O here.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.headers import get_bool, get_int, get_str
from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.names import (
    EXPRESSION_TYPE_TAG,
    PERM_PRIORITY,
    SubscriptionData,
    group_error,
    topic_error,
)
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.topic_attributes import (
    TopicMessageType,
    accepted_types,
    parse_modification,
)

# ------------------------------------------------------------------ limits

JAVA_INT_MIN: Final = -(2**31)
JAVA_INT_MAX: Final = 2**31 - 1
JAVA_LONG_MIN: Final = -(2**63)
JAVA_LONG_MAX: Final = 2**63 - 1

# Queues per topic. RocketMQ's broker sets no upper bound, but each queue is a directory of
# consume-queue files and a slot in every route: 1024 is far above any real topic.
MAX_QUEUE_NUMS: Final = 1024
# A valid permission has no bit at or above PERM_PRIORITY (PermName.isValid): 0..7.
MAX_PERM: Final = PERM_PRIORITY - 1
# Messages one pull or receive may ask for: the Java push consumer's pullBatchSize range.
MAX_BATCH_SIZE: Final = 1024
# How long a pull or receive may be held waiting for messages: the proxy's
# grpcClientConsumerMaxLongPollingTimeoutMillis. Clients ask for 15 s (push consumers) or
# 20 s (pull consumers) and time out after 30 s, so a longer hold could only be wasted.
MAX_LONG_POLLING_MS: Final = 20_000
# Epoch milliseconds of 9999-12-31T23:59:59.999Z, the last instant java.time, Python's
# datetime and Spark can all represent: later "timestamps" break whoever formats them.
MAX_TIMESTAMP_MS: Final = 253_402_300_799_999
# Send to "any queue": RocketMQ picks one for a negative queue id.
ANY_QUEUE: Final = -1


class FieldKind(enum.Enum):
    """What a refused field was, for edges that answer with their own codes (gRPC)."""

    NUMBER = "number"
    QUEUE_NUMS = "queue_nums"
    PERMISSION = "permission"
    QUEUE_ID = "queue_id"
    OFFSET = "offset"
    INVISIBLE_TIME = "invisible_time"
    BATCH_SIZE = "batch_size"
    BODY_SIZE = "body_size"
    BODY_EMPTY = "body_empty"
    TIMESTAMP = "timestamp"
    TOPIC = "topic"
    GROUP = "group"
    SUBSCRIPTION = "subscription"
    MESSAGE_TYPE = "message_type"
    TRANSACTION_RESOLUTION = "transaction_resolution"


class FieldError(RequestError):
    """A request field outside what RocketMQ accepts; the remark says what to send instead."""

    def __init__(self, code: int, remark: str, kind: FieldKind, name: str) -> None:
        super().__init__(code, remark)
        self.kind = kind
        self.name = name


@dataclass(frozen=True, slots=True)
class _Range:
    """The domain of one field kind and how a value outside it is refused."""

    lo: int
    hi: int
    kind: FieldKind
    code: int
    what: str

    def check(self, value: int, name: str) -> int:
        if not self.lo <= value <= self.hi:
            raise FieldError(
                self.code,
                f"{name}={value} is illegal: {self.what} must be {self.lo}..{self.hi}",
                self.kind,
                name,
            )
        return value


_INVALID = ResponseCode.INVALID_PARAMETER
_JAVA_INT = _Range(
    JAVA_INT_MIN, JAVA_INT_MAX, FieldKind.NUMBER, ResponseCode.SYSTEM_ERROR, "a Java int"
)
_JAVA_LONG = _Range(
    JAVA_LONG_MIN, JAVA_LONG_MAX, FieldKind.NUMBER, ResponseCode.SYSTEM_ERROR, "a Java long"
)
_QUEUE_NUMS = _Range(1, MAX_QUEUE_NUMS, FieldKind.QUEUE_NUMS, _INVALID, "a topic's queue count")
_OFFSET = _Range(0, JAVA_LONG_MAX, FieldKind.OFFSET, _INVALID, "an offset")
_TIMESTAMP = _Range(0, MAX_TIMESTAMP_MS, FieldKind.TIMESTAMP, _INVALID, "epoch milliseconds")


# ------------------------------------------------------------------ values


def check_java_int(value: int, name: str) -> int:
    """``value`` if it fits a Java ``int``.

    Raises:
        FieldError: SYSTEM_ERROR, as RocketMQ fails to decode such a header field.
    """
    return _JAVA_INT.check(value, name)


def check_java_long(value: int, name: str) -> int:
    """``value`` if it fits a Java ``long``.

    Raises:
        FieldError: SYSTEM_ERROR, as RocketMQ fails to decode such a header field.
    """
    return _JAVA_LONG.check(value, name)


def check_queue_nums(value: int, name: str = "queueNums") -> int:
    """A topic's read or write queue count: 1..MAX_QUEUE_NUMS.

    Raises:
        FieldError: INVALID_PARAMETER.
    """
    return _QUEUE_NUMS.check(value, name)


def check_perm(value: int, name: str = "perm") -> int:
    """A topic permission made of PermName's read, write and inherit bits (0..7).

    Raises:
        FieldError: NO_PERMISSION with Validators.checkTopicConfig's remark.
    """
    if not 0 <= value <= MAX_PERM:
        raise FieldError(
            ResponseCode.NO_PERMISSION,
            f"topicPermission value: {value} is invalid: {name} must be 0..{MAX_PERM} "
            "(4 read, 2 write, 1 inherit)",
            FieldKind.PERMISSION,
            name,
        )
    return value


def check_queue_id(
    value: int,
    queue_nums: int | None = None,
    *,
    topic: str = "",
    allow_any: bool = False,
    name: str = "queueId",
    code: int = _INVALID,
) -> int:
    """A queue id: 0..queue_nums - 1 (any Java int >= 0 when the count is unknown). Where
    RocketMQ lets the broker choose (a send), a negative id comes back as ANY_QUEUE.

    Raises:
        FieldError: with ``code`` (INVALID_PARAMETER; sends and pulls answer SYSTEM_ERROR in
            RocketMQ), naming the topic's count.
    """
    if allow_any and JAVA_INT_MIN <= value < 0:
        return ANY_QUEUE
    hi = JAVA_INT_MAX if queue_nums is None else queue_nums - 1
    if not 0 <= value <= hi:
        of_topic = f" of topic[{topic}]" if topic else ""
        count = "" if queue_nums is None else f" (the topic has {queue_nums} queues)"
        remark = f"{name}[{value}] is illegal: queue ids{of_topic} are 0..{hi}{count}"
        if allow_any:
            remark += ", or negative to let the broker choose"
        raise FieldError(code, remark, FieldKind.QUEUE_ID, name)
    return value


def check_offset(value: int, name: str = "offset", *, allow_none: bool = False) -> int:
    """A queue offset or a CommitLog offset: 0..2^63 - 1. Where a negative value means "none"
    (a pull's commitOffset), any negative long comes back as -1.

    Raises:
        FieldError: INVALID_PARAMETER.
    """
    if allow_none and JAVA_LONG_MIN <= value < 0:
        return -1
    return _OFFSET.check(value, name)


def check_long_polling_ms(value: int, name: str = "suspendTimeoutMillis") -> int:
    """How long a request may be held, clamped to 0..MAX_LONG_POLLING_MS as the proxy clamps a
    ReceiveMessage's long polling timeout: a negative wish is no hold, a longer one the cap.

    Raises:
        FieldError: SYSTEM_ERROR for a time past a Java long (RocketMQ cannot decode it).
    """
    return max(0, min(_JAVA_LONG.check(value, name), MAX_LONG_POLLING_MS))


def check_invisible_ms(value: int, lo: int, hi: int, name: str = "invisibleTime") -> int:
    """How long a popped message stays invisible: lo..hi ms (the broker's configured range).

    Raises:
        FieldError: INVALID_PARAMETER.
    """
    invisible = _Range(lo, hi, FieldKind.INVISIBLE_TIME, _INVALID, "an invisible time in ms")
    return invisible.check(value, name)


def check_batch_size(value: int, name: str = "maxMsgNums", limit: int = MAX_BATCH_SIZE) -> int:
    """Messages one pull or receive asks for: 1..limit.

    Raises:
        FieldError: INVALID_PARAMETER.
    """
    return _Range(1, limit, FieldKind.BATCH_SIZE, _INVALID, "a message count").check(value, name)


def check_body_size(size: int, limit: int, *, allow_empty: bool = True) -> int:
    """A message body's size in bytes: at most limit (the store's maxMessageSize).

    Raises:
        FieldError: MESSAGE_ILLEGAL.
    """
    if size == 0 and not allow_empty:
        raise FieldError(
            ResponseCode.MESSAGE_ILLEGAL, "the message body is empty", FieldKind.BODY_EMPTY, "body"
        )
    if size > limit:
        raise FieldError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message body is {size} bytes, over the maximum of {limit}",
            FieldKind.BODY_SIZE,
            "body",
        )
    return size


def check_timestamp_ms(value: int, name: str = "timestamp") -> int:
    """Epoch milliseconds: 0..MAX_TIMESTAMP_MS (the year 9999).

    Raises:
        FieldError: INVALID_PARAMETER.
    """
    return _TIMESTAMP.check(value, name)


def check_topic(value: str, code: int = _INVALID) -> str:
    """A topic name (TopicValidator.validateTopic); RocketMQ's broker answers INVALID_PARAMETER
    to a send or a topic creation that names an invalid one.

    Raises:
        FieldError: with ``code``.
    """
    err = topic_error(value)
    if err is not None:
        raise FieldError(code, err, FieldKind.TOPIC, "topic")
    return value


def check_group(value: str, code: int = _INVALID) -> str:
    """A consumer or producer group name (TopicValidator.validateGroup).

    Raises:
        FieldError: with ``code``.
    """
    err = group_error(value)
    if err is not None:
        raise FieldError(code, err, FieldKind.GROUP, "group")
    return value


# A long written as a JSON string, which fastjson converts.
_JSON_LONG = re.compile(r"-?[0-9]{1,19}")


def check_subscription_data(value: object, name: str = "subscriptionData") -> SubscriptionData:
    """A SubscriptionData JSON object (in a heartbeat or a CHECK_CLIENT_CONFIG body): a valid
    ``topic``, ``subString`` and ``expressionType`` strings or null (null is "*" and TAG),
    ``subVersion`` a Java long, as a number or a string of digits (0 when absent). Other
    members (tagsSet, codeSet) are derived from these and not read.

    Raises:
        FieldError: SYSTEM_ERROR for members of the wrong type, as RocketMQ fails to decode
            them; INVALID_PARAMETER for an invalid topic name.
    """

    def refuse(why: str) -> FieldError:
        return FieldError(ResponseCode.SYSTEM_ERROR, f"{name}: {why}", FieldKind.SUBSCRIPTION, name)

    if not isinstance(value, dict):
        raise refuse(f"{value!r} is not an object")
    topic = value.get("topic")
    if not isinstance(topic, str):
        raise refuse(f"topic {topic!r} is not a string")
    check_topic(topic)
    texts = []
    for member in ("subString", "expressionType"):
        text = value.get(member)
        if text is not None and not isinstance(text, str):
            raise refuse(f"{member} {text!r} is not a string")
        texts.append(text or "")
    version = value.get("subVersion", 0)
    if isinstance(version, str) and _JSON_LONG.fullmatch(version):
        version = int(version)  # the C++ client sends it as a string, which fastjson reads
    if type(version) is not int:
        raise refuse(f"subVersion {version!r} is not a number")
    return SubscriptionData(
        topic,
        texts[0],
        texts[1] or EXPRESSION_TYPE_TAG,
        check_java_long(version, f"{name}.subVersion"),
    )


def check_message_type(
    topic: str, topic_type: TopicMessageType | None, actual: TopicMessageType
) -> TopicMessageType:
    """A message's type against its topic's ``message.type`` (the proxy's
    DefaultTopicMessageTypeValidator; a topic without one accepts every type).

    Raises:
        FieldError: MESSAGE_ILLEGAL, as the proxy answers a remoting send
            (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE over gRPC).
    """
    if actual not in accepted_types(topic_type):
        raise FieldError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"TopicMessageType validate failed, the expected type is {topic_type}, but actual "
            f"type is {actual} (topic[{topic}])",
            FieldKind.MESSAGE_TYPE,
            "message_type",
        )
    return actual


def check_transaction_resolution(value: int, name: str = "commitOrRollback") -> int:
    """How a producer ends a transaction: SysFlag's NOT_TYPE (unknown), COMMIT or ROLLBACK type.

    Raises:
        FieldError: SYSTEM_ERROR, as EndTransactionRequestHeader.checkFields fails.
    """
    if value not in _RESOLUTIONS:
        raise FieldError(
            ResponseCode.SYSTEM_ERROR,
            f"commitOrRollback field wrong: {name}={value}, expected 0 (unknown), 8 (commit) "
            "or 12 (rollback)",
            FieldKind.TRANSACTION_RESOLUTION,
            name,
        )
    return value


_RESOLUTIONS: Final = (
    SysFlag.TRANSACTION_NOT_TYPE,
    SysFlag.TRANSACTION_COMMIT_TYPE,
    SysFlag.TRANSACTION_ROLLBACK_TYPE,
)


# ------------------------------------------------------------------ remoting header fields
# Each reads one extFields entry with protocol.headers (a missing required field or one that
# is not a number is SYSTEM_ERROR there) and validates it; ``default`` None means required.


def java_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    """An ``Integer`` header field."""
    return check_java_int(get_int(cmd, name, default), name)


def java_boolean(cmd: RemotingCommand, name: str, default: bool | None = None) -> bool:
    """A ``boolean`` header field, read as Boolean.parseBoolean reads it ("true" in any case
    is true, anything else false); required when ``default`` is None (@CFNotNull)."""
    if default is None:
        get_str(cmd, name)
    return get_bool(cmd, name, bool(default))


def java_long(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    """A ``Long`` header field."""
    return check_java_long(get_int(cmd, name, default), name)


def queue_nums(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    """readQueueNums / writeQueueNums / defaultTopicQueueNums."""
    return check_queue_nums(java_int(cmd, name, default), name)


def perm(cmd: RemotingCommand, name: str = "perm", default: int | None = None) -> int:
    return check_perm(java_int(cmd, name, default), name)


def queue_id(
    cmd: RemotingCommand,
    queue_nums: int | None = None,
    *,
    topic: str = "",
    allow_any: bool = False,
    name: str = "queueId",
    default: int | None = None,
) -> int:
    """A queue id header field (see ``check_queue_id``)."""
    value = java_int(cmd, name, default)
    return check_queue_id(value, queue_nums, topic=topic, allow_any=allow_any, name=name)


def offset(
    cmd: RemotingCommand, name: str, default: int | None = None, *, allow_none: bool = False
) -> int:
    """queueOffset / commitOffset / offset (see ``check_offset``)."""
    return check_offset(java_long(cmd, name, default), name, allow_none=allow_none)


def long_polling_ms(
    cmd: RemotingCommand, name: str = "suspendTimeoutMillis", default: int | None = 0
) -> int:
    return check_long_polling_ms(java_long(cmd, name, default), name)


def batch_size(
    cmd: RemotingCommand,
    name: str = "maxMsgNums",
    default: int | None = None,
    limit: int = MAX_BATCH_SIZE,
) -> int:
    return check_batch_size(java_int(cmd, name, default), name, limit)


def timestamp_ms(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    return check_timestamp_ms(java_long(cmd, name, default), name)


def topic(cmd: RemotingCommand, name: str = "topic", code: int = _INVALID) -> str:
    return check_topic(get_str(cmd, name), code)


def group(cmd: RemotingCommand, name: str = "consumerGroup", code: int = _INVALID) -> str:
    return check_group(get_str(cmd, name), code)


def attributes(cmd: RemotingCommand, name: str = "attributes") -> dict[str, str]:
    """A topic attribute modification list (``+key=value,-key``), by signed key; empty when
    absent. Whether each key and value may be applied is ``topic_attributes.alter``'s rule.

    Raises:
        RequestError: SYSTEM_ERROR for a malformed list, as RocketMQ's AttributeParser fails.
    """
    return parse_modification(get_str(cmd, name, ""))


def transaction_resolution(cmd: RemotingCommand, name: str = "commitOrRollback") -> int:
    return check_transaction_resolution(java_int(cmd, name), name)
