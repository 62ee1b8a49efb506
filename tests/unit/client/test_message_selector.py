"""Subscribing by SQL92 with our client: a MessageSelector (Java's MessageSelector.bySql /
byTag) becomes a subscription whose heartbeat and pull carry its expression type; tag
subscriptions stay as they were."""

from __future__ import annotations

import pytest

from pocketmq.client import MessageSelector
from pocketmq.client.pull import Subscription
from pocketmq.errors import ClientError
from pocketmq.protocol.message import MessageExt


def test_a_sql92_selector_is_sent_as_written_with_its_type() -> None:
    sub = Subscription.parse("T", MessageSelector.by_sql("a > 5 AND TAGS = 'A'"))
    assert not sub.is_tag and sub.tags == frozenset()
    data = sub.to_json()
    assert data["subString"] == "a > 5 AND TAGS = 'A'"
    assert data["expressionType"] == "SQL92"
    assert data["tagsSet"] == [] and data["codeSet"] == []
    # The broker evaluates SQL92: the client does not filter again.
    assert sub.matches(MessageExt(topic="T", body=b"", properties={"TAGS": "B"}))


def test_a_tag_selector_is_a_tag_subscription() -> None:
    by_selector = Subscription.parse("T", MessageSelector.by_tag("A || B"))
    by_text = Subscription.parse("T", "A || B")
    assert (by_selector.expression, by_selector.tags) == (by_text.expression, by_text.tags)
    assert by_selector.to_json()["expressionType"] == "TAG"
    assert Subscription.parse("T", MessageSelector.by_tag()).expression == "*"


@pytest.mark.parametrize(
    "selector",
    [MessageSelector.by_sql(""), MessageSelector.by_sql("  "), MessageSelector("X", "a")],
)
def test_selectors_the_client_can_tell_are_wrong_are_refused_at_subscribe(
    selector: MessageSelector,
) -> None:
    with pytest.raises(ClientError):
        Subscription.parse("T", selector)
