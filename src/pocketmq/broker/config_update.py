"""The broker's settings as GET_BROKER_CONFIG (26) shows them and UPDATE_BROKER_CONFIG (25)
changes them (RocketMQ's Configuration): a Java-properties text with RocketMQ's names, and a
data version that moves with every accepted update.

RocketMQ merges an update into its in-memory config objects (unknown keys are ignored) and
writes them to the broker's config file. pocketmq's BrokerConfig is frozen and read by many
components, so an update here is decided as a whole:

- a key that is not a setting, or a value the setting cannot take, refuses the whole update
  (INVALID_PARAMETER, saying which); RocketMQ's black-listed keys are NO_PERMISSION as there;
- the accepted keys are written to the broker.conf the broker was started with (one atomic
  rewrite, other lines kept), so a restart keeps them; a broker started without a config file
  refuses updates, having nowhere to keep them;
- the keys in ``RUNTIME_KEYS`` take effect at once (each is read where it is used from the
  broker's current config); every other key takes effect at the next start, and the answer's
  remark names them. GET_BROKER_CONFIG shows the settings in effect.

No I/O here except ``persist`` (run off the event loop).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmq.broker.config import BrokerConfig
from pocketmq.conf import camel_to_snake, convert_value, format_value, property_name
from pocketmq.errors import ConfigError, RequestError, StoreError
from pocketmq.jsonfile import write_bytes_atomic
from pocketmq.protocol.codes import ResponseCode
from pocketmq.store.config import StoreConfig

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# Never changed remotely (AdminBrokerProcessor's configBlackList and BrokerConfig's default
# "configBlackList;brokerConfigPath").
BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})

# Applied to the running broker at once: each is read, where it is used, from the broker's
# (or its messaging service's) current config object.
RUNTIME_KEYS = frozenset({
    "brokerPermission", "autoCreateTopicEnable", "enableMixedMessageType",
    "enableTopicMessageTypeCheck", "traceOn", "regionId", "slaveReadEnable",
    "enablePropertyFilter", "storeReplyMessageEnable",
})  # fmt: skip

_STORE = "store"


def _field_types(cls: type) -> dict[str, typing.Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != _STORE}


_BROKER_FIELDS = _field_types(BrokerConfig)
_STORE_FIELDS = _field_types(StoreConfig)


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """Every setting by its RocketMQ name, as text (unset ones left out, as RocketMQ leaves
    out nulls)."""
    props: dict[str, str] = {}
    for owner, names in ((config, _BROKER_FIELDS), (config.store, _STORE_FIELDS)):
        for name in names:
            value = getattr(owner, name)
            if value is not None:
                props[property_name(name)] = format_value(value)
    return dict(sorted(props.items()))


def format_properties(props: Mapping[str, str]) -> str:
    """A properties text as MixAll.properties2String writes it: ``key=value`` lines."""
    return "".join(f"{key}={value}\n" for key, value in props.items())


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """An accepted update: the config in effect now, the accepted keys, and those of them
    that wait for a restart."""

    config: BrokerConfig
    accepted: dict[str, str]
    after_restart: list[str]


def plan_update(current: BrokerConfig, update: Mapping[str, str]) -> ConfigChange:
    """Check an update against the current config and split it into what applies now and
    what at the next start.

    Raises:
        RequestError: NO_PERMISSION for a black-listed key; INVALID_PARAMETER for a key that
            is not a setting or a value the setting cannot take (nothing is changed then).
    """
    if BLACK_LIST & update.keys():
        raise RequestError(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    known = _BROKER_FIELDS.keys() | _STORE_FIELDS.keys()
    unknown = sorted(k for k in update if camel_to_snake(k) not in known)
    if unknown:
        raise RequestError(
            ResponseCode.INVALID_PARAMETER,
            f"unknown broker setting(s): {', '.join(unknown)} (GET_BROKER_CONFIG lists them)",
        )
    broker_changes: dict[str, typing.Any] = {}
    store_changes: dict[str, typing.Any] = {}
    try:
        for key, raw in update.items():
            name = camel_to_snake(key)
            if name in _BROKER_FIELDS:
                broker_changes[name] = convert_value(key, "value", raw, _BROKER_FIELDS[name])
            else:
                store_changes[name] = convert_value(key, "value", raw, _STORE_FIELDS[name])
        desired = current.replace(**broker_changes, store=current.store.replace(**store_changes))
    except ConfigError as exc:
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"broker config: {exc}") from exc
    now = {}
    after_restart = []
    for key in sorted(update):
        name = camel_to_snake(key)
        if key in RUNTIME_KEYS:
            now[name] = getattr(desired, name)
        elif format_value(_current_value(current, key)) != update[key].strip():
            after_restart.append(key)
    return ConfigChange(current.replace(**now), dict(update), after_restart)


def _current_value(config: BrokerConfig, key: str) -> object:
    name = camel_to_snake(key)
    return getattr(config if name in _BROKER_FIELDS else config.store, name)


_KEY = re.compile(r"^\s*([^#!\s=:][^\s=:]*)\s*[=:\s]")


def merge_properties_text(text: str, updates: Mapping[str, str]) -> str:
    """A properties file's text with the updated keys' lines replaced (the last of a repeated
    key; the others dropped) and new keys appended; comments and other lines kept."""
    lines = text.splitlines()
    keys = [m.group(1) if (m := _KEY.match(line + " ")) else "" for line in lines]
    last = {key: index for index, key in enumerate(keys) if key in updates}
    out = []
    for index, (line, key) in enumerate(zip(lines, keys, strict=True)):
        if key not in updates:
            out.append(line)
        elif last[key] == index:
            out.append(f"{key}={updates[key]}")
    out.extend(f"{k}={v}" for k, v in updates.items() if k not in last)
    return "\n".join(out) + "\n"


def persist(path: Path, updates: Mapping[str, str]) -> None:
    """Write the accepted keys into the broker's config file, atomically.

    Raises:
        StoreError: the file cannot be written (it is left as it was).
    """
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        text = ""
    write_bytes_atomic(path, merge_properties_text(text, updates).encode())


class BrokerConfigurator:
    """The broker's Configuration: its data version and the updates applied to it."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.data_version = {"counter": 0, "timestamp": broker.clock.now_ms()}

    def properties_text(self) -> str:
        return format_properties(config_properties(self.broker.config))

    async def update(self, update: Mapping[str, str]) -> ConfigChange:
        """Check, persist, then apply an update (nothing changes when a step fails).

        Raises:
            RequestError: see ``plan_update``; SYSTEM_ERROR when the broker has no config
                file to keep the update in, or the file cannot be written.
        """
        change = plan_update(self.broker.config, update)
        path = self.broker.config.broker_config_path
        if path is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                "this broker was started without a config file (-c broker.conf), so an "
                "update could not outlive a restart: start it with one",
            )
        try:
            await asyncio.to_thread(persist, path, change.accepted)
        except StoreError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        self.broker.config = change.config
        self.broker.messaging.config = change.config
        self.data_version = {
            "counter": self.data_version["counter"] + 1,
            "timestamp": self.broker.clock.now_ms(),
        }
        log.info("broker config updated: %s (after a restart: %s)",
                 change.accepted, change.after_restart or "none")  # fmt: skip
        if "brokerPermission" in change.accepted:
            # The topics register with the new permission (registerBrokerAll).
            self.broker.topics.next_version()
            self.broker.register_soon()
        return change
