"""A subscription group read from JSON (a request body or subscriptionGroup.json) has its
fields' types, or is refused: a group named 5 or a consumeEnable of "yes" never gets in."""

from __future__ import annotations

from typing import Any

import pytest

from pocketmq.broker.subscription_groups import SubscriptionGroupConfig


def test_members_are_read_with_their_types() -> None:
    cfg = SubscriptionGroupConfig.from_json(
        {"groupName": "G", "retryQueueNums": "3", "retryMaxTimes": 2.0, "consumeEnable": False,
         "consumeMessageOrderly": True, "somethingNew": [1]}
    )  # fmt: skip
    assert cfg == SubscriptionGroupConfig(
        "G", consume_enable=False, retry_queue_nums=3, retry_max_times=2,
        consume_message_orderly=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"groupName": 5}, TypeError),
        ({"groupName": ["G"]}, TypeError),
        ({"groupName": "G", "consumeEnable": "yes"}, TypeError),
        ({"groupName": "G", "retryQueueNums": True}, TypeError),
        ({"groupName": "G", "brokerId": None}, TypeError),
        ({"groupName": "G", "retryQueueNums": "x"}, ValueError),
        ({"groupName": "G", "retryMaxTimes": float("inf")}, ValueError),
    ],
)
def test_members_of_another_type_are_refused(data: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        SubscriptionGroupConfig.from_json(data)
