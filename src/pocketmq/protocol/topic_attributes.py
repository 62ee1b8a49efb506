"""Topic attributes, as RocketMQ 5 keeps them in each TopicConfig's ``attributes`` map: what an
UPDATE_AND_CREATE_TOPIC's ``attributes`` header may change (AttributeParser, AttributeUtil,
TopicAttributes) and the message type a topic accepts (TopicMessageType). No I/O here.

- The header is a modification list, ``+key=value`` to add or change, ``-key`` to delete,
  comma-separated: ``+message.type=TRANSACTION``. A new topic takes additions only; an
  unchangeable attribute may be set only when its topic is created.
- Known keys: ``message.type`` (changeable: UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION or
  MIXED), ``queue.type`` and ``cleanup.policy`` (unchangeable, and only with the value that
  describes what pocketmq's store does: SimpleCQ, DELETE). RocketMQ's ``reserve.time`` needs a
  tiered store, which pocketmq does not have: it is refused as an unsupported key, as any other.
- A refused modification is SYSTEM_ERROR with RocketMQ's remark (its broker answers the
  RuntimeException of AttributeUtil that way).

**A topic without ``message.type`` accepts every message type**, as pocketmq topics always
have. RocketMQ reads a missing attribute as NORMAL, so that only normal messages may be sent
to it; pocketmq keeps its topics open instead, and a topic that sets the attribute gets
RocketMQ's rule (MIXED accepts all).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst

ADD_SIGN = "+"
DELETE_SIGN = "-"
KEY_VALUE_SEPARATOR = "="
MODIFICATION_SEPARATOR = ","


class TopicMessageType(enum.StrEnum):
    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class EnumAttribute:
    name: str
    # Whether the attribute may change after its topic is created.
    changeable: bool
    universe: frozenset[str]


MESSAGE_TYPE = EnumAttribute("message.type", True, frozenset(TopicMessageType))
QUEUE_TYPE = EnumAttribute("queue.type", False, frozenset({"SimpleCQ"}))
CLEANUP_POLICY = EnumAttribute("cleanup.policy", False, frozenset({"DELETE"}))
ATTRIBUTES: dict[str, EnumAttribute] = {
    a.name: a for a in (MESSAGE_TYPE, QUEUE_TYPE, CLEANUP_POLICY)
}


def _refuse(remark: str) -> RequestError:
    return RequestError(ResponseCode.SYSTEM_ERROR, remark)


def parse_modification(text: str) -> dict[str, str]:
    """The modifications an ``attributes`` header lists, by signed key (``+key``: value,
    ``-key``: "").

    Raises:
        RequestError: SYSTEM_ERROR for a malformed item or a key listed twice.
    """
    mods: dict[str, str] = {}
    if not text:
        return mods
    for item in text.split(MODIFICATION_SEPARATOR):
        if KEY_VALUE_SEPARATOR in item:
            key, _, value = item.partition(KEY_VALUE_SEPARATOR)
            if not key.startswith(ADD_SIGN) or not value or KEY_VALUE_SEPARATOR in value:
                raise _refuse(f"add/alter attribute format is wrong: {item}")
        else:
            key, value = item, ""
            if not key.startswith(DELETE_SIGN):
                raise _refuse(f"delete attribute format is wrong: {item}")
        if key in mods:
            raise _refuse(f"key duplication: {key}")
        mods[key] = value
    return mods


def alter(
    current: Mapping[str, str], modification: Mapping[str, str], *, create: bool
) -> dict[str, str]:
    """A topic's attributes after a modification (``parse_modification``'s result).

    Args:
        current: the topic's attributes now (empty for a new topic).
        modification: signed keys and their values.
        create: the topic does not exist yet: only additions, of any attribute.

    Raises:
        RequestError: SYSTEM_ERROR for an unknown key, a value outside its attribute's set,
            a change of an unchangeable attribute, a deletion of a missing one, or a deletion
            while creating.
    """
    result = dict(current)
    seen: set[str] = set()
    for signed, value in modification.items():
        sign, key = signed[:1], signed[1:]
        if not key or ADD_SIGN in key or DELETE_SIGN in key:
            raise _refuse(f"kv string format wrong: {signed}")
        if key in seen:
            raise _refuse(f"alter duplication key. key: {key}")
        seen.add(key)
        attribute = ATTRIBUTES.get(key)
        if attribute is None:
            raise _refuse(f"unsupported key: {key}")
        if create and sign != ADD_SIGN:
            raise _refuse(f"only add attribute is supported while creating topic. key: {key}")
        if not create and not attribute.changeable:
            raise _refuse(f"attempt to update an unchangeable attribute. key: {key}")
        if sign == DELETE_SIGN:
            if key not in result:
                raise _refuse(f"attempt to delete a nonexistent key: {key}")
            del result[key]
            continue
        if value not in attribute.universe:
            raise _refuse(f"value is not in set: {sorted(attribute.universe)}")
        result[key] = value
    return result


def topic_message_type(attributes: Mapping[str, str]) -> TopicMessageType | None:
    """The message type a topic's attributes declare; None when they declare none."""
    value = attributes.get(MESSAGE_TYPE.name)
    return None if value is None else TopicMessageType(value)


# Any of these makes a message a DELAY one; read on every send, so one set test.
_DELAY_PROPERTIES = frozenset(
    (
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.TIMER_DELIVER_MS,
        MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELAY_MS,
    )
)


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """The type of a message, from the properties that make it one (parseFromMessageProperty):
    TRANSACTION, DELAY, FIFO, NORMAL in that order of precedence."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if not properties.keys().isdisjoint(_DELAY_PROPERTIES):
        return TopicMessageType.DELAY
    if MessageConst.SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def accepted_types(topic_type: TopicMessageType | None) -> tuple[TopicMessageType, ...]:
    """The message types a topic of ``topic_type`` accepts (None: no ``message.type``, all);
    UNSPECIFIED accepts none, as RocketMQ's validator refuses every send to such a topic."""
    if topic_type is None or topic_type is TopicMessageType.MIXED:
        return (
            TopicMessageType.NORMAL,
            TopicMessageType.FIFO,
            TopicMessageType.DELAY,
            TopicMessageType.TRANSACTION,
        )
    if topic_type is TopicMessageType.UNSPECIFIED:
        return ()
    return (topic_type,)
