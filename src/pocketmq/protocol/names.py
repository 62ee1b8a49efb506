"""RocketMQ's names and the rules about them: system topics, retry / dead-letter / POP retry
topic builders, permission bits, the topic and group validators, tag expressions and what a
subscription declares (expression types, SubscriptionData).

The one home of each rule, imported by the client, the broker, the NameServer and the gRPC
endpoint alike (TopicValidator, MixAll, KeyBuilder, PermName, Validators, FilterAPI and
ExpressionType in RocketMQ). No I/O here.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.protocol.properties import tags_code

# ------------------------------------------------------------------ system topics and groups

# The template a send to an unknown topic is created from (autoCreateTopicEnable).
AUTO_CREATE_TOPIC_KEY: Final = "TBW102"
# Delayed messages wait here, queue id = delay level - 1.
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
# Every topic the broker keeps for itself starts with this.
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
# 5.x timer messages (any delivery time) wait here.
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
# Transactional half messages and their commit/rollback op records.
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
# Halves checked transactionCheckMax times without an answer are kept here.
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
# The system group whose offsets in the half and op topics are the check's progress.
TRANS_GROUP: Final = "CID_RMQ_SYS_TRANS"
# POP checkpoints and acks, one topic per cluster; the group whose offset is the replay start.
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
# Replies of request-reply messages go to the cluster's reply topic (MixAll.getReplyTopic).
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
# Message traces of clients with tracing on (TopicValidator.RMQ_SYS_TRACE_TOPIC).
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
# The first delay level of a consumer retry (10 s); the n-th retry waits level 3 + n - 1.
FIRST_RETRY_DELAY_LEVEL: Final = 3

_SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
    }
)


def retry_topic(group: str) -> str:
    """The retry topic of a 4.x consumer group (MixAll.getRetryTopic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """The dead-letter topic of a consumer group (MixAll.getDLQTopic)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def pop_retry_topic(group: str, topic: str) -> str:
    """The retry topic of a 5.x (POP) group for one topic (KeyBuilder.buildPopRetryTopicV1)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_origin(group: str, topic: str) -> str | None:
    """The topic a group's POP retry topic retries (pop_retry_topic's inverse); None when
    ``topic`` is not one of the group's POP retry topics."""
    prefix = pop_retry_topic(group, "")
    return topic[len(prefix) :] if topic.startswith(prefix) and topic != prefix else None


def reply_topic(cluster: str) -> str:
    """The topic replies are sent to in a cluster; every broker of it has the topic."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def revive_topic(cluster: str) -> str:
    """The revive log of a cluster's POP consumption."""
    return REVIVE_TOPIC_PREFIX + cluster


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str:
    """The group a 4.x retry topic belongs to; the topic itself when it is not one."""
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) :] if is_retry_topic(topic) else topic


# MixAll.TOOLS_CONSUMER_GROUP: the group admin tools pull with.
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
# Groups the broker and RocketMQ's tools use themselves (MixAll's names, and
# isSysConsumerGroup's CID_RMQ_SYS_ prefix); consoles leave them out of group lists.
_SYSTEM_GROUPS: Final = frozenset(
    {TOOLS_CONSUMER_GROUP, "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
     "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
     "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL"}
)  # fmt: skip
_SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"


def is_sys_consumer_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup: a group named with the CID_RMQ_SYS_ prefix."""
    return group.startswith(_SYSTEM_GROUP_PREFIX)


def is_system_group(group: str) -> bool:
    return group in _SYSTEM_GROUPS or is_sys_consumer_group(group)


def is_system_topic(topic: str) -> bool:
    """A topic only the broker writes: producers may not send to it (TopicValidator)."""
    return topic in _SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


# ------------------------------------------------------------------ permissions (PermName)

# MixAll.MASTER_ID: the brokerId of the master of a brokerName; its slaves have 1 and up.
MASTER_ID: Final = 0

PERM_PRIORITY: Final = 0x8
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_INHERIT: Final = 0x1
PERM_READ_WRITE: Final = PERM_READ | PERM_WRITE


# TopicSysFlag: a topic's unit flags, as brokers register them (topicSysFlag).
TOPIC_SYS_FLAG_UNIT: Final = 0x1
TOPIC_SYS_FLAG_UNIT_SUB: Final = 0x2


def is_readable(perm: int) -> bool:
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    return perm & PERM_WRITE == PERM_WRITE


def is_inherited(perm: int) -> bool:
    return perm & PERM_INHERIT == PERM_INHERIT


def perm_to_string(perm: int) -> str:
    """``RWX`` as mqadmin prints a permission (``-`` for each bit not set)."""
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )


# ------------------------------------------------------------------ validators

# Topic names: TopicValidator's characters and length; retry and DLQ topics carry a group
# name (up to 255 characters), so they may be as long as a group.
TOPIC_MAX_LENGTH: Final = 127
GROUP_MAX_LENGTH: Final = 255
NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
# Used with fullmatch: the pattern's "$" alone would accept a name ending in a newline.
_VALID_NAME = re.compile(NAME_PATTERN)


# Both validators run on every request: a broker sees few distinct names, so answers are kept.
@functools.lru_cache(maxsize=4096)
def topic_error(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name, or None (TopicValidator.validateTopic)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not _VALID_NAME.fullmatch(topic):
        return (
            f"The specified topic[{topic}] contains illegal characters, "
            f"allowing only {NAME_PATTERN}"
        )
    limit = GROUP_MAX_LENGTH if is_retry_topic(topic) or is_dlq_topic(topic) else TOPIC_MAX_LENGTH
    if len(topic) > limit:
        return f"The specified topic is longer than topic max length {limit}."
    return None


@functools.lru_cache(maxsize=4096)
def group_error(group: str) -> str | None:
    """Why ``group`` is not a valid consumer or producer group name, or None
    (Validators.checkGroup)."""
    if not group or not group.strip():
        return "the specified group is blank"
    if not _VALID_NAME.fullmatch(group):
        return (
            f"the specified group[{group}] contains illegal characters, "
            f"allowing only {NAME_PATTERN}"
        )
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    return None


# ------------------------------------------------------------------ tag expressions

SUB_ALL: Final = "*"
TAG_SEPARATOR: Final = "||"


class TagExpressionError(ValueError):
    """A tag expression with no tag in it (``"||"``): FilterAPI's "subString split error"."""


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A subscription's tag expression: ``"*"`` or ``"TagA || TagB"`` (SubscriptionData).

    The broker filters consume-queue units by ``codes`` (Java hash codes of the tags); clients
    recheck the tag itself, since two tags may share a hash code.
    """

    expression: str
    tags: frozenset[str]  # empty: every tag
    codes: frozenset[int]

    @property
    def matches_all(self) -> bool:
        return not self.tags

    def matches(self, tag: str | None) -> bool:
        return not self.tags or tag in self.tags

    def matches_code(self, code: int) -> bool:
        return not self.codes or code in self.codes


MATCH_ALL: Final = TagExpression(SUB_ALL, frozenset(), frozenset())


# Parsed on every pull that carries its subscription: few distinct expressions, kept.
@functools.lru_cache(maxsize=4096)
def parse_tag_expression(expression: str | None) -> TagExpression:
    """``None``, ``""`` or ``"*"`` match every tag; otherwise the tags between ``||``, trimmed.

    Raises:
        TagExpressionError: the expression names no tag.
    """
    text = (expression or "").strip()
    if text in ("", SUB_ALL):
        return MATCH_ALL
    tags = frozenset(t.strip() for t in text.split(TAG_SEPARATOR) if t.strip())
    if not tags:
        raise TagExpressionError(f"subString split error: {expression!r} names no tag")
    return TagExpression(text, tags, frozenset(tags_code(t) for t in tags))


# ------------------------------------------------------------------ subscriptions

# ExpressionType: how a subscription's expression filters.
EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type, an empty one, or TAG."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """What a consumer declares for one topic (SubscriptionData): a tag expression or a SQL92
    selector, and the version it was made at (the client's clock, ms). Compiled by the
    broker's ``filtering``."""

    topic: str
    expression: str  # subString: "TagA || TagB", "*", or a SQL92 selector
    expression_type: str = EXPRESSION_TYPE_TAG
    sub_version: int = 0

    @property
    def is_tag(self) -> bool:
        return is_tag_type(self.expression_type)

    def to_json(self) -> dict[str, Any]:
        """As fastjson writes RocketMQ's SubscriptionData (tagsSet and codeSet empty for a
        SQL92 selector or an expression naming no tag)."""
        tags: frozenset[str] = frozenset()
        # An expression naming no tag is kept as declared (the pulls relying on it are refused).
        with contextlib.suppress(TagExpressionError):
            if self.is_tag:
                tags = parse_tag_expression(self.expression).tags
        return subscription_json(
            self.topic, self.expression, self.expression_type, self.sub_version, tags
        )


def subscription_json(
    topic: str, expression: str, expression_type: str, version: int, tags: Iterable[str]
) -> dict[str, Any]:
    """A SubscriptionData body object, as fastjson writes it."""
    ordered = sorted(tags)
    return {
        "classFilterMode": False,
        "topic": topic,
        "subString": expression,
        "tagsSet": ordered,
        "codeSet": [tags_code(t) for t in ordered],
        "subVersion": version,
        "expressionType": expression_type,
    }
