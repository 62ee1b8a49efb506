"""Topic and subscription-group tables keep only what they could persist."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from pocketmq.broker.topics import TopicConfig, TopicConfigManager
from pocketmq.errors import StoreError


def test_a_topic_that_cannot_be_persisted_is_not_kept(tmp_path: Path) -> None:
    topics = TopicConfigManager(
        tmp_path / "topics.json", cluster="C", broker_name="b", auto_create=True,
        default_queue_nums=4,
    )  # fmt: skip
    topics.load()
    topics.update(TopicConfig("T", 2, 2))
    with pytest.raises(StoreError):
        topics.update(TopicConfig("T", 2, 2, perm=10**20))
    with pytest.raises(StoreError):
        topics.update(TopicConfig("U", 10**20, 1))
    assert topics.get("T") == TopicConfig("T", 2, 2)
    assert topics.get("U") is None
    topics.update(TopicConfig("V", 1, 1))  # later changes persist again
    reloaded = TopicConfigManager(
        tmp_path / "topics.json", cluster="C", broker_name="b", auto_create=True,
        default_queue_nums=4,
    )  # fmt: skip
    reloaded.load()
    assert reloaded.get("T") == TopicConfig("T", 2, 2) and reloaded.get("V") is not None


def test_a_group_that_cannot_be_persisted_is_not_kept(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path / "groups.json", auto_create=False)
    groups.load()
    groups.update(SubscriptionGroupConfig("G"))
    with pytest.raises(StoreError):
        groups.update(SubscriptionGroupConfig("G", retry_queue_nums=10**20))
    assert groups.find("G") == SubscriptionGroupConfig("G")
