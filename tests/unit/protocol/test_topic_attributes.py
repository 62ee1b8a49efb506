"""Topic attributes as RocketMQ 5 modifies them (AttributeParser, AttributeUtil), and the
message types a topic accepts (TopicMessageType, the proxy's type validator)."""

from __future__ import annotations

import pytest

from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import FieldError, FieldKind, check_message_type
from pocketmq.protocol.message import MessageConst
from pocketmq.protocol.topic_attributes import (
    TopicMessageType,
    accepted_types,
    alter,
    message_type_of,
    parse_modification,
    topic_message_type,
)

T = TopicMessageType


def test_a_modification_list_parses_by_signed_key() -> None:
    assert parse_modification("") == {}
    assert parse_modification("+message.type=FIFO,-queue.type") == {
        "+message.type": "FIFO",
        "-queue.type": "",
    }


@pytest.mark.parametrize(
    ("text", "remark"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong"),
        ("+message.type=", "add/alter attribute format is wrong"),
        ("+a=b=c", "add/alter attribute format is wrong"),
        ("queue.type", "delete attribute format is wrong"),
        ("+a=1,+a=2", "key duplication: +a"),
        ("+a=1,", "delete attribute format is wrong"),
    ],
)
def test_a_malformed_list_is_a_system_error(text: str, remark: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_modification(text)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert remark in info.value.remark


def test_creating_and_changing_attributes() -> None:
    created = alter({}, parse_modification("+message.type=TRANSACTION,+queue.type=SimpleCQ"),
                    create=True)  # fmt: skip
    assert created == {"message.type": "TRANSACTION", "queue.type": "SimpleCQ"}
    changed = alter(created, parse_modification("+message.type=NORMAL"), create=False)
    assert changed == {"message.type": "NORMAL", "queue.type": "SimpleCQ"}
    deleted = alter(changed, parse_modification("-message.type"), create=False)
    assert deleted == {"queue.type": "SimpleCQ"}
    assert alter(deleted, {}, create=False) == deleted  # nothing listed: kept as it is


@pytest.mark.parametrize(
    ("current", "text", "create", "remark"),
    [
        ({}, "+reserve.time=5", True, "unsupported key: reserve.time"),
        ({}, "+color=blue", True, "unsupported key: color"),
        ({}, "+message.type=ANY", True, "value is not in set"),
        ({}, "+queue.type=BatchCQ", True, "value is not in set"),
        ({}, "+cleanup.policy=COMPACTION", True, "value is not in set"),
        ({}, "-message.type", True, "only add attribute is supported while creating topic"),
        ({"queue.type": "SimpleCQ"}, "+queue.type=SimpleCQ", False, "unchangeable"),
        ({}, "-message.type", False, "attempt to delete a nonexistent key: message.type"),
        ({}, "+message.type=FIFO,-message.type", False, "alter duplication key"),
        ({}, "+=FIFO", True, "kv string format wrong"),
    ],
)
def test_refused_changes(current: dict[str, str], text: str, create: bool, remark: str) -> None:
    with pytest.raises(RequestError) as info:
        alter(current, parse_modification(text), create=create)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert remark in info.value.remark


def test_a_topic_without_message_type_accepts_every_type() -> None:
    assert topic_message_type({}) is None
    every = (T.NORMAL, T.FIFO, T.DELAY, T.TRANSACTION)
    assert accepted_types(None) == every
    assert accepted_types(T.MIXED) == every
    assert accepted_types(T.TRANSACTION) == (T.TRANSACTION,)
    assert accepted_types(T.UNSPECIFIED) == ()
    assert topic_message_type({"message.type": "FIFO"}) is T.FIFO


@pytest.mark.parametrize(
    ("props", "kind"),
    [
        ({}, T.NORMAL),
        ({MessageConst.SHARDING_KEY: "g"}, T.FIFO),
        ({MessageConst.DELAY_TIME_LEVEL: "3"}, T.DELAY),
        ({MessageConst.TIMER_DELIVER_MS: "1"}, T.DELAY),
        ({MessageConst.TIMER_DELAY_SEC: "1"}, T.DELAY),
        ({MessageConst.TIMER_DELAY_MS: "1"}, T.DELAY),
        ({MessageConst.TIMER_DELAY_MS: "1", MessageConst.SHARDING_KEY: "g"}, T.DELAY),
        ({MessageConst.TRANSACTION_PREPARED: "true", MessageConst.DELAY_TIME_LEVEL: "3"},
         T.TRANSACTION),
        ({MessageConst.TRANSACTION_PREPARED: "false"}, T.NORMAL),
    ],
)  # fmt: skip
def test_the_type_of_a_message(props: dict[str, str], kind: TopicMessageType) -> None:
    assert message_type_of(props) is kind


def test_a_send_of_another_type_is_refused() -> None:
    assert check_message_type("T", None, T.TRANSACTION) is T.TRANSACTION
    assert check_message_type("T", T.MIXED, T.FIFO) is T.FIFO
    assert check_message_type("T", T.FIFO, T.FIFO) is T.FIFO
    for topic_type, actual in [(T.NORMAL, T.TRANSACTION), (T.UNSPECIFIED, T.NORMAL)]:
        with pytest.raises(FieldError) as info:
            check_message_type("T", topic_type, actual)
        assert info.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert info.value.kind is FieldKind.MESSAGE_TYPE
        assert f"expected type is {topic_type}, but actual type is {actual}" in info.value.remark
