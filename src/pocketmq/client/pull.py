"""Subscriptions and the pull request shared by the push and the lite pull consumer
(PullAPIWrapper): send PULL_MESSAGE, decode the found messages, recheck their tags.

A subscription filters by tag (``"TagA || TagB"``) or by a SQL92 selector on the messages'
properties (``MessageSelector.by_sql("a > 5")``). The broker evaluates SQL92; the client does
not compile it, and its consumers ask the broker at start (CHECK_CLIENT_CONFIG) as the Java
client does, so that a selector the broker refuses fails the start."""

from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.instance import ClientInstance
from pocketmq.client.route import MessageQueue
from pocketmq.errors import ClientError, ProtocolError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageExt, PullSysFlag
from pocketmq.protocol.names import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SUB_ALL,
    TagExpressionError,
    is_retry_topic,
    is_tag_type,
    parse_tag_expression,
    subscription_json,
)
from pocketmq.protocol.pull_body import decode_pull_body


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """How a subscription selects messages (Java's MessageSelector): by tag or by SQL92."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = SUB_ALL) -> MessageSelector:
        """``"*"`` or ``"TagA || TagB"``."""
        return cls(EXPRESSION_TYPE_TAG, expression)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 selector on the messages' properties, e.g. ``"a > 5 AND TAGS = 'A'"``;
        the broker must serve SQL92 (pocketmq's does by default)."""
        return cls(EXPRESSION_TYPE_SQL92, expression)


@dataclass(slots=True)
class Subscription:
    """SubscriptionData: a tag expression (``"*"``, ``"TagA || TagB"``) or a SQL92 selector."""

    topic: str
    expression: str = SUB_ALL
    tags: frozenset[str] = frozenset()
    version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = EXPRESSION_TYPE_TAG

    @classmethod
    def parse(cls, topic: str, expression: str | MessageSelector | None) -> Subscription:
        """Raises: ClientError: a tag expression with no tag in it, an empty SQL92 selector,
        or an expression type other than TAG and SQL92."""
        selector = expression if isinstance(expression, MessageSelector) else None
        if selector is not None and not is_tag_type(selector.expression_type):
            if selector.expression_type != EXPRESSION_TYPE_SQL92:
                raise ClientError(f"expression type {selector.expression_type!r} is unknown")
            if not selector.expression.strip():
                raise ClientError("Expression can't be null! SQL92")
            return cls(topic, selector.expression, expression_type=EXPRESSION_TYPE_SQL92)
        try:
            parsed = parse_tag_expression(selector.expression if selector else expression)
        except TagExpressionError as exc:
            raise ClientError(str(exc)) from exc
        return cls(topic, parsed.expression, parsed.tags)

    @property
    def is_tag(self) -> bool:
        return is_tag_type(self.expression_type)

    def matches(self, msg: MessageExt) -> bool:
        """The tag recheck (the broker matched tag hashes); SQL92 is the broker's alone."""
        return not self.tags or msg.tags in self.tags

    def to_json(self) -> dict[str, Any]:
        return subscription_json(
            self.topic, self.expression, self.expression_type, self.version, self.tags
        )


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_PULL_OK = tuple(_PULL_STATUS)


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    # Which broker of the queue's brokerName the next pull should go to (0: the master).
    suggest_which_broker_id: int = 0


def decode_messages(body: bytes, mq: MessageQueue) -> list[MessageExt]:
    """Decode the records of a pull answer, as a consumer sees them: bodies inflated, the
    message id is the producer's UNIQ_KEY, a retry message shows its original topic.

    Raises:
        ClientError: the body does not decode.
    """
    try:
        return decode_pull_body(body, is_retry_topic(mq.topic))
    except (ProtocolError, struct.error) as exc:
        raise ClientError(f"cannot decode messages pulled from {mq}: {exc}") from exc


def pull_fields(group: str, mq: MessageQueue, sub: Subscription, max_nums: int) -> dict[str, str]:
    """PULL_MESSAGE's fields, as the strings they are sent as, with the queue offset, system
    flag, commit offset and suspend time left empty for ``pull`` to fill: the rest stays the
    same from one pull of a queue to the next, so its pull loop builds this once per
    subscription."""
    return {
        "consumerGroup": group,
        "topic": mq.topic,
        "queueId": str(mq.queue_id),
        "queueOffset": "",
        "maxMsgNums": str(max_nums),
        "sysFlag": "",
        "commitOffset": "",
        "suspendTimeoutMillis": "",
        "subscription": sub.expression,
        "subVersion": str(sub.version),
        "expressionType": sub.expression_type,
    }


async def pull(
    instance: ClientInstance,
    addr: str,
    group: str,
    mq: MessageQueue,
    sub: Subscription,
    offset: int,
    max_nums: int,
    *,
    commit_offset: int = -1,
    suspend_ms: int = 0,
    timeout_s: float = 10.0,
    fields: dict[str, str] | None = None,
) -> PullResult:
    """One PULL_MESSAGE; the broker holds it up to suspend_ms when there is nothing new.
    ``fields``, when given, is ``pull_fields`` of the same group, queue, subscription and
    max_nums (it is copied, not changed).

    Raises:
        BrokerError: an error code (no topic, no permission, ...).
        ConnectionError, TimeoutError: no answer.
        ClientError: the answer does not decode.
    """
    sys_flag = PullSysFlag.SUBSCRIPTION
    if commit_offset > 0:
        sys_flag |= PullSysFlag.COMMIT_OFFSET
    if suspend_ms > 0:
        sys_flag |= PullSysFlag.SUSPEND
    request = (fields or pull_fields(group, mq, sub, max_nums)).copy()
    request["queueOffset"] = str(offset)
    request["sysFlag"] = str(sys_flag)
    request["commitOffset"] = str(commit_offset) if commit_offset > 0 else "0"
    request["suspendTimeoutMillis"] = str(suspend_ms)
    resp = await instance.invoke(
        addr, RequestCode.PULL_MESSAGE, request, timeout_s=timeout_s, ok=_PULL_OK
    )
    f = resp.ext_fields
    status = _PULL_STATUS[resp.code]
    try:
        next_begin = int(f["nextBeginOffset"])
        min_offset, max_offset = int(f.get("minOffset", 0)), int(f.get("maxOffset", 0))
        suggest = int(f.get("suggestWhichBrokerId", 0))
    except (KeyError, ValueError) as exc:
        raise ClientError(f"pull answer from {addr} lacks offsets: {exc}") from exc
    if status is not PullStatus.FOUND:
        return PullResult(status, next_begin, min_offset, max_offset, [], suggest)
    messages = decode_messages(resp.body, mq)
    if sub.tags:
        messages = [m for m in messages if sub.matches(m)]
    return PullResult(status, next_begin, min_offset, max_offset, messages, suggest)
