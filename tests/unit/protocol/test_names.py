"""RocketMQ's names and rules: topic and group validation with its exact messages, the retry /
DLQ / POP retry builders, permission bits and tag expressions (codes are Java hash codes)."""

from __future__ import annotations

import pytest

from pocketmq.protocol import names
from pocketmq.protocol.names import (
    MATCH_ALL,
    TagExpression,
    TagExpressionError,
    group_error,
    parse_tag_expression,
    topic_error,
)
from pocketmq.protocol.properties import tags_code

CHARS = "allowing only ^[%|a-zA-Z0-9_-]+$"

# --- validators ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        ("T", None),
        ("Topic_1-a|b%c", None),
        ("a" * 127, None),
        ("a" * 128, "The specified topic is longer than topic max length 127."),
        ("%RETRY%" + "g" * 248, None),
        ("%RETRY%" + "g" * 249, "The specified topic is longer than topic max length 255."),
        ("%DLQ%" + "g" * 250, None),
        ("%DLQ%" + "g" * 251, "The specified topic is longer than topic max length 255."),
        ("", "The specified topic is blank."),
        ("   ", "The specified topic is blank."),
        ("bad topic!", f"The specified topic[bad topic!] contains illegal characters, {CHARS}"),
        ("Tüpic", f"The specified topic[Tüpic] contains illegal characters, {CHARS}"),
        # Characters are checked before the length, as TopicValidator does.
        ("." * 200, f"The specified topic[{'.' * 200}] contains illegal characters, {CHARS}"),
    ],
)
def test_topic_error(topic: str, error: str | None) -> None:
    assert topic_error(topic) == error


@pytest.mark.parametrize(
    ("group", "error"),
    [
        ("CG", None),
        ("g" * 255, None),
        ("g" * 256, "the specified group is longer than group max length 255."),
        ("", "the specified group is blank"),
        (" \t", "the specified group is blank"),
        ("a/b", f"the specified group[a/b] contains illegal characters, {CHARS}"),
    ],
)
def test_group_error(group: str, error: str | None) -> None:
    assert group_error(group) == error


# --- system topics and builders --------------------------------------------------------------


def test_builders() -> None:
    assert names.retry_topic("G") == "%RETRY%G"
    assert names.dlq_topic("G") == "%DLQ%G"
    assert names.pop_retry_topic("G", "T") == "%RETRY%G_T"
    assert names.pop_retry_origin("G", "%RETRY%G_T") == "T"
    assert names.pop_retry_origin("G", "%RETRY%G") is None  # a 4.x retry topic
    assert names.pop_retry_origin("H", "%RETRY%G_T") is None
    assert names.is_sys_consumer_group("CID_RMQ_SYS_TRANS")
    assert not names.is_sys_consumer_group("TOOLS_CONSUMER")
    assert names.revive_topic("C") == "rmq_sys_REVIVE_LOG_C"
    assert names.group_of_retry_topic("%RETRY%G") == "G"
    assert names.group_of_retry_topic("T") == "T"
    assert names.is_retry_topic("%RETRY%G") and not names.is_retry_topic("%DLQ%G")
    assert names.is_dlq_topic("%DLQ%G") and not names.is_dlq_topic("G")


@pytest.mark.parametrize(
    ("topic", "system"),
    [
        ("TBW102", True),
        ("SCHEDULE_TOPIC_XXXX", True),
        ("rmq_sys_wheel_timer", True),
        ("rmq_sys_REVIVE_LOG_C", True),
        ("RMQ_SYS_TRANS_HALF_TOPIC", True),
        ("RMQ_SYS_TRANS_OP_HALF_TOPIC", True),
        ("TBW102x", False),
        ("%RETRY%G", False),
        ("T", False),
    ],
)
def test_is_system_topic(topic: str, system: bool) -> None:
    assert names.is_system_topic(topic) is system


# --- permissions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("perm", "readable", "writeable", "inherited", "text"),
    [
        (0, False, False, False, "---"),
        (names.PERM_READ, True, False, False, "R--"),
        (names.PERM_WRITE, False, True, False, "-W-"),
        (names.PERM_READ_WRITE, True, True, False, "RW-"),
        (names.PERM_READ_WRITE | names.PERM_INHERIT, True, True, True, "RWX"),
        (names.PERM_PRIORITY | names.PERM_READ, True, False, False, "R--"),
    ],
)
def test_permissions(
    perm: int, readable: bool, writeable: bool, inherited: bool, text: str
) -> None:
    assert names.is_readable(perm) is readable
    assert names.is_writeable(perm) is writeable
    assert names.is_inherited(perm) is inherited
    assert names.perm_to_string(perm) == text


def test_permission_bits_are_rocketmqs() -> None:
    assert (names.PERM_PRIORITY, names.PERM_READ, names.PERM_WRITE, names.PERM_INHERIT) == (
        8, 4, 2, 1,
    )  # fmt: skip
    assert names.PERM_READ_WRITE == 6


# --- tag expressions -------------------------------------------------------------------------


@pytest.mark.parametrize("expression", [None, "", "   ", "*", " * "])
def test_expressions_matching_every_tag(expression: str | None) -> None:
    parsed = parse_tag_expression(expression)
    assert parsed is MATCH_ALL
    assert parsed.matches_all and parsed.expression == "*"
    assert parsed.matches(None) and parsed.matches("any") and parsed.matches_code(12345)


@pytest.mark.parametrize(
    ("expression", "text", "tags"),
    [
        ("TagA", "TagA", {"TagA"}),
        (" TagA || TagB ", "TagA || TagB", {"TagA", "TagB"}),
        ("TagA||TagB||", "TagA||TagB||", {"TagA", "TagB"}),
        ("TagA || TagA", "TagA || TagA", {"TagA"}),
        ("|| TagB", "|| TagB", {"TagB"}),
    ],
)
def test_tag_lists(expression: str, text: str, tags: set[str]) -> None:
    parsed = parse_tag_expression(expression)
    assert parsed == TagExpression(text, frozenset(tags), frozenset(tags_code(t) for t in tags))
    assert not parsed.matches_all
    assert all(parsed.matches(t) for t in tags)
    assert not parsed.matches("TagC") and not parsed.matches(None)


def test_codes_are_java_hash_codes() -> None:
    # Java: "TagA".hashCode() == 2598919, "TagB".hashCode() == 2598920.
    parsed = parse_tag_expression("TagA || TagB")
    assert parsed.codes == {2598919, 2598920}
    assert parsed.matches_code(2598919) and not parsed.matches_code(2598921)


@pytest.mark.parametrize("expression", ["||", " || ", "|| ||"])
def test_expressions_naming_no_tag(expression: str) -> None:
    with pytest.raises(TagExpressionError, match="subString split error"):
        parse_tag_expression(expression)
