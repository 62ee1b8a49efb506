"""Consumer group settings (SubscriptionGroupManager), in {store}/config/subscriptionGroup.json.

A group is created with RocketMQ's defaults on first use when ``autoCreateSubscriptionGroup``
is on. Its ``retryMaxTimes`` (16) bounds the retries of its messages before they go to the
group's dead-letter queue, unless the client sends its own maximum. ``consumeMessageOrderly``
makes it a FIFO group for 5.x clients (the settings reply and the POP service obey it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pocketmq.broker.topics import data_version_of, install_newer, put_persisted
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.conf import camel_to_snake, snake_to_camel
from pocketmq.jsonfile import read_json, write_json_atomic


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # A FIFO group for 5.x clients: one message group's messages are delivered one at a time.
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {snake_to_camel(f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubscriptionGroupConfig:
        """The config in a JSON object (a request body or subscriptionGroup.json); members
        it does not know are ignored.

        Raises:
            TypeError: a member's value is not of its field's type (numbers may be strings).
            ValueError: a number that does not parse.
        """
        kinds = {f.name: type(f.default) for f in fields(cls) if f.name != "group_name"}
        kinds["group_name"] = str
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = camel_to_snake(key)
            kind = kinds.get(name)
            if kind is None:
                continue
            if kind is int and isinstance(value, str | float):
                try:
                    value = int(value)
                except OverflowError as exc:  # float("inf")
                    raise ValueError(f"{key} must be a number, got {value!r}") from exc
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(f"{key} must be {kind.__name__}, got {value!r}")
            kwargs[name] = value
        return cls(**kwargs)


class SubscriptionGroupManager:
    def __init__(self, path: Path, auto_create: bool, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self.clock = clock  # stamps the data version
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = {"timestamp": self.clock.now_ms(), "counter": 0}

    def load(self) -> None:
        data = read_json(self.path)
        if isinstance(data, dict):
            for name, cfg in (data.get("subscriptionGroupTable") or {}).items():
                if isinstance(cfg, dict):
                    self.table[name] = SubscriptionGroupConfig.from_json({"groupName": name, **cfg})
            if isinstance(data.get("dataVersion"), dict):
                self.data_version = data_version_of(data["dataVersion"])

    def install(self, wrapper: dict[str, Any]) -> bool:
        """A master's SubscriptionGroupWrapper, on a slave (``topics.install_newer``)."""
        return install_newer(
            self, wrapper, "subscriptionGroupTable",
            lambda name, cfg: SubscriptionGroupConfig.from_json({**cfg, "groupName": name}),
        )  # fmt: skip

    def wrapper(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {n: c.to_json() for n, c in sorted(self.table.items())},
            "dataVersion": self.data_version,
        }

    def persist(self) -> None:
        write_json_atomic(self.path, self.wrapper())

    def _changed(self) -> None:
        self.data_version = {
            "timestamp": self.clock.now_ms(),
            "counter": self.data_version["counter"] + 1,
        }
        self.persist()

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        put_persisted(self.table, cfg.group_name, cfg, self._changed)

    def delete(self, group: str) -> None:
        if self.table.pop(group, None) is not None:
            self._changed()

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings; created with the defaults if absent and auto-create is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create and group:
            cfg = SubscriptionGroupConfig(group)
            self.update(cfg)
        return cfg
