"""UPDATE_AND_CREATE_TOPIC's ``attributes`` header: applied as RocketMQ 5's broker applies it,
kept in topics.json, refused with RocketMQ's codes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.handlers.admin import AdminHandlers
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand


def tables(path: Path) -> TopicConfigManager:
    topics = TopicConfigManager(
        path, cluster="C", broker_name="b", auto_create=True, default_queue_nums=4
    )
    topics.load()
    return topics


def admin(topics: TopicConfigManager, **config: Any) -> AdminHandlers:
    broker: Any = SimpleNamespace(
        config=BrokerConfig(**config), store=None, topics=topics, subscription_groups=None,
        register_soon=lambda: None,
    )  # fmt: skip
    return AdminHandlers(broker)


def create(handlers: AdminHandlers, topic: str, attributes: str | None) -> RemotingCommand:
    fields = {"topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
    if attributes is not None:
        fields["attributes"] = attributes
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    return handlers.update_and_create_topic(None, cmd)  # type: ignore[arg-type]


def test_attributes_are_applied_and_persisted(tmp_path: Path) -> None:
    topics = tables(tmp_path / "topics.json")
    handlers = admin(topics)
    assert create(handlers, "TxTopic", "+message.type=TRANSACTION").code == ResponseCode.SUCCESS
    assert topics.get("TxTopic").attributes == {"message.type": "TRANSACTION"}  # type: ignore[union-attr]
    # An update without the header keeps them; one with it changes them.
    assert create(handlers, "TxTopic", None).code == ResponseCode.SUCCESS
    assert topics.get("TxTopic").attributes == {"message.type": "TRANSACTION"}  # type: ignore[union-attr]
    assert create(handlers, "TxTopic", "+message.type=NORMAL").code == ResponseCode.SUCCESS
    reloaded = tables(tmp_path / "topics.json")
    assert reloaded.get("TxTopic").attributes == {"message.type": "NORMAL"}  # type: ignore[union-attr]
    assert create(handlers, "Plain", None).code == ResponseCode.SUCCESS
    assert topics.get("Plain").attributes == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("attributes", "code"),
    [
        ("+message.type=MIXED", ResponseCode.INVALID_PARAMETER),
        ("+message.type=WHATEVER", ResponseCode.SYSTEM_ERROR),
        ("message.type=FIFO", ResponseCode.SYSTEM_ERROR),
        ("-message.type", ResponseCode.SYSTEM_ERROR),
        ("+reserve.time=10", ResponseCode.SYSTEM_ERROR),
    ],
)
def test_refused_attributes_create_nothing(tmp_path: Path, attributes: str, code: int) -> None:
    topics = tables(tmp_path / "topics.json")
    with pytest.raises(RequestError) as info:
        create(admin(topics), "TxTopic", attributes)
    assert info.value.code == code
    assert topics.get("TxTopic") is None


def test_mixed_when_the_broker_allows_it(tmp_path: Path) -> None:
    topics = tables(tmp_path / "topics.json")
    handlers = admin(topics, enable_mixed_message_type=True)
    assert create(handlers, "TxTopic", "+message.type=MIXED").code == ResponseCode.SUCCESS
    assert topics.get("TxTopic").attributes == {"message.type": "MIXED"}  # type: ignore[union-attr]
