"""Topic configs (TopicConfigManager), persisted in {store}/config/topics.json.

A send to an unknown topic creates it from the ``TBW102`` template when auto-creation is
enabled, as RocketMQ's autoCreateTopicEnable does. Topic names and their validation live in
``pocketmq.protocol.names``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.jsonfile import read_json, write_json_atomic
from pocketmq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    PERM_INHERIT,
    PERM_READ_WRITE,
    SCHEDULE_TOPIC,
    is_readable,
    is_writeable,
    reply_topic,
)

T = TypeVar("T")


def put_persisted(table: dict[str, T], key: str, value: T, persist: Callable[[], None]) -> None:
    """``table[key] = value``, undone when ``persist`` fails: a table never holds what its
    file could not (an unserializable value would otherwise fail every later write)."""
    old = table.get(key)
    table[key] = value
    try:
        persist()
    except BaseException:
        if old is None:
            del table[key]
        else:
            table[key] = old
        raise


def data_version_of(value: Any) -> dict[str, int]:
    """A DataVersion as its JSON carries it, reduced to what tells two apart (RocketMQ 5's
    stateVersion, when present, is left out: 4.x compares timestamp and counter).

    Raises:
        TypeError, ValueError: not an object of numbers.
    """
    if not isinstance(value, dict):
        raise TypeError(f"dataVersion must be an object, got {value!r}")
    return {"timestamp": int(value.get("timestamp", 0)), "counter": int(value.get("counter", 0))}


class Versioned(Protocol[T]):
    """A metadata table with RocketMQ's DataVersion (topics, subscription groups)."""

    table: dict[str, T]
    data_version: dict[str, int]

    def persist(self) -> None: ...


def install_newer(
    manager: Versioned[T], wrapper: dict[str, Any], key: str,
    parse: Callable[[str, dict[str, Any]], T],
) -> bool:  # fmt: skip
    """A slave takes its master's table (the wrapper's ``key``, each entry parsed) in place of
    its own when the master's data version differs, as SlaveSynchronize does, and persists it;
    returns whether it was taken.

    Raises:
        KeyError, TypeError, ValueError: the wrapper is malformed (nothing changes).
    """
    version = data_version_of(wrapper.get("dataVersion"))
    if version == manager.data_version:
        return False
    manager.table = {str(n): parse(str(n), c) for n, c in (wrapper.get(key) or {}).items()}
    manager.data_version = version
    manager.persist()
    return True


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ 5's topic attributes (``protocol.topic_attributes``): message.type and others.
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", 4)),
            write_queue_nums=int(data.get("writeQueueNums", 4)),
            perm=int(data.get("perm", PERM_READ_WRITE)),
            topic_filter_type=str(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
            attributes={str(k): str(v) for k, v in (data.get("attributes") or {}).items()},
        )


class TopicConfigManager:
    def __init__(self, path: Path, *, cluster: str, broker_name: str, auto_create: bool,
                 default_queue_nums: int, clock: Clock = SYSTEM_CLOCK) -> None:  # fmt: skip
        self.path = path
        self.clock = clock  # stamps the data version
        self.table: dict[str, TopicConfig] = {}
        self.data_version = {"timestamp": self.clock.now_ms(), "counter": 0}
        # Topics created on demand must reach the NameServer before their next use.
        self.on_created: Callable[[], None] = lambda: None
        self._system = [
            TopicConfig(SCHEDULE_TOPIC, 18, 18),
            TopicConfig(cluster, 16, 16, PERM_READ_WRITE | PERM_INHERIT),
            TopicConfig(broker_name, 1, 1, PERM_READ_WRITE | PERM_INHERIT),
            # Where request-reply consumers send their replies (TopicConfigManager).
            TopicConfig(reply_topic(cluster), 1, 1),
        ]
        if auto_create:
            self._system.append(
                TopicConfig(AUTO_CREATE_TOPIC_KEY, default_queue_nums, default_queue_nums,
                            PERM_READ_WRITE | PERM_INHERIT)
            )  # fmt: skip

    def load(self) -> None:
        data = read_json(self.path)
        if isinstance(data, dict):
            for name, cfg in (data.get("topicConfigTable") or {}).items():
                self.table[name] = TopicConfig.from_json({"topicName": name, **cfg})
            version = data.get("dataVersion")
            if isinstance(version, dict):
                self.data_version = data_version_of(version)
        for cfg in self._system:
            self.table.setdefault(cfg.topic_name, cfg)

    def persist(self) -> None:
        write_json_atomic(
            self.path,
            {
                "topicConfigTable": {n: c.to_json() for n, c in sorted(self.table.items())},
                "dataVersion": self.data_version,
            },
        )

    def _changed(self) -> None:
        self.data_version = {
            "timestamp": self.clock.now_ms(),
            "counter": self.data_version["counter"] + 1,
        }
        self.persist()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def update(self, cfg: TopicConfig) -> None:
        put_persisted(self.table, cfg.topic_name, cfg, self._changed)

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._changed()
        return True

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig | None:
        """createTopicInSendMessageMethod: a new topic shaped by the template, or None when the
        template does not exist or may not be inherited."""
        template = self.table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        nums = max(1, min(queue_nums, template.write_queue_nums))
        cfg = TopicConfig(topic, nums, nums, template.perm & ~PERM_INHERIT)
        self.update(cfg)
        self.on_created()
        return cfg

    def create_system_if_absent(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        """Retry and DLQ topics are created on demand."""
        cfg = self.table.get(topic)
        if cfg is None:
            cfg = TopicConfig(topic, queue_nums, queue_nums, perm)
            self.update(cfg)
            self.on_created()
        return cfg

    def install(self, wrapper: dict[str, Any]) -> bool:
        """A master's TopicConfigSerializeWrapper, on a slave (``install_newer``)."""
        return install_newer(
            self,
            wrapper,
            "topicConfigTable",
            lambda name, cfg: TopicConfig.from_json({**cfg, "topicName": name}),
        )

    def wrapper(self, broker_permission: int = PERM_READ_WRITE) -> dict[str, Any]:
        """The topicConfigSerializeWrapper of a registration: a broker that may not be read or
        written registers every topic with its own permission (registerBrokerAll)."""
        table = self.table
        if not (is_readable(broker_permission) and is_writeable(broker_permission)):
            table = {n: dataclasses.replace(c, perm=broker_permission) for n, c in table.items()}
        return {
            "topicConfigTable": {n: c.to_json() for n, c in table.items()},
            "dataVersion": self.data_version,
        }

    def next_version(self) -> None:
        """Something the registration carries changed outside the table (the broker's
        permission): a new data version, so that the NameServer takes the topics again."""
        self._changed()
