"""NamesrvConfig and the rules of GET/UPDATE_NAMESRV_CONFIG (319/318): the settings as
RocketMQ's properties text under RocketMQ's names, which of them a running NameServer may
change, and what an update is checked against. No I/O here: the server writes and reads
``configStorePath``.

As in RocketMQ, the keys of its ``configBlackList`` (configBlackList, configStorePath,
kvConfigPath, rocketmqHome) are refused with NO_PERMISSION. Unlike RocketMQ, which skips keys
it does not know and keeps a listenPort change it cannot apply until a restart, an update that
names an unknown key, a setting read only at start, or a value that is not valid is refused
whole with INVALID_PARAMETER and a remark saying what to change: nothing is half applied.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pocketmq.conf import (
    camel_to_snake,
    check_port,
    convert_value,
    fields_from_properties,
    parse_properties,
    read_properties,
    snake_to_camel,
)
from pocketmq.errors import ConfigError, RequestError
from pocketmq.namesrv.route_table import BROKER_EXPIRE_MS
from pocketmq.protocol.codes import ResponseCode

# NamesrvConfig.configBlackList's default, plus rocketmqHome (DefaultRequestProcessor adds it).
CONFIG_BLACK_LIST: Final = frozenset(
    {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
)
# What a running NameServer applies at once: the broker expiry scan reads both every round.
UPDATABLE: Final = frozenset({"scan_not_active_broker_interval", "broker_channel_expired_time"})


@dataclass(frozen=True, slots=True, kw_only=True)
class NamesrvConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9876
    # Persisted KV config (RocketMQ: ~/namesrv/kvConfig.json).
    kv_config_path: Path = Path.home() / "namesrv" / "kvConfig.json"
    # Where UPDATE_NAMESRV_CONFIG persists the settings (RocketMQ: ~/namesrv/namesrv.properties);
    # read back at start, so an update outlives a restart.
    config_store_path: Path = Path.home() / "namesrv" / "namesrv.properties"
    # How often brokers that stopped registering are looked for (ms).
    scan_not_active_broker_interval: int = 5_000
    # A broker silent this long is dropped (BROKER_CHANNEL_EXPIRED_TIME, ms); a broker may ask
    # for its own in REGISTER_BROKER's heartbeatTimeoutMillis.
    broker_channel_expired_time: int = BROKER_EXPIRE_MS

    def __post_init__(self) -> None:
        """Raises: ConfigError: a port that is none, or an interval that is not above 0 (the
        scan would spin)."""
        check_port("listen_port", self.listen_port)
        for name in sorted(UPDATABLE):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(
                    f"{snake_to_camel(name)}={value}: expected a whole number of milliseconds "
                    "above 0"
                )

    @classmethod
    def from_file(cls, path: Path | str, **overrides: Any) -> NamesrvConfig:
        values = fields_from_properties(cls, read_properties(path))
        values.update(overrides)
        return cls(**values)


def to_properties_text(config: NamesrvConfig) -> str:
    """Every setting as ``key=value`` lines (MixAll.properties2String), sorted by key."""
    values = {snake_to_camel(f.name): getattr(config, f.name) for f in dataclasses.fields(config)}
    lines = []
    for key, value in sorted(values.items()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text}\n")
    return "".join(lines)


def parse_update(body: bytes) -> dict[str, str]:
    """An UPDATE_NAMESRV_CONFIG body (properties text) as key -> value.

    Raises:
        RequestError: INVALID_PARAMETER when the body is not properties text.
    """
    try:
        return parse_properties(body, "the config update")
    except ConfigError as exc:
        raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from exc


def apply_update(
    config: NamesrvConfig, props: dict[str, str]
) -> tuple[NamesrvConfig, dict[str, Any]]:
    """Check an update (RocketMQ's key names -> text values) and apply it.

    Returns:
        The new config and the settings that changed (snake_case name -> new value).

    Raises:
        RequestError: NO_PERMISSION for a key of the black list; INVALID_PARAMETER for an
            unknown key, a key read only at start, or a bad value. The remark names the key
            and what would be accepted.
    """
    if CONFIG_BLACK_LIST & props.keys():
        # RocketMQ's own remark, so its tools recognise the refusal.
        raise RequestError(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    known = {f.name for f in dataclasses.fields(config)}
    can_change = ", ".join(sorted(snake_to_camel(n) for n in UPDATABLE))
    hints = typing.get_type_hints(NamesrvConfig)
    changes: dict[str, Any] = {}
    for key, raw in sorted(props.items()):
        name = camel_to_snake(key)
        if name not in known:
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"unknown NameServer setting {key!r}; a running NameServer can change: "
                f"{can_change}",
            )
        if name not in UPDATABLE:
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"{key} is read only at start: set it in the NameServer's config file and "
                f"restart it; a running NameServer can change: {can_change}",
            )
        try:
            changes[name] = convert_value("NamesrvConfig", name, raw, hints[name])
        except ConfigError as exc:
            raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from exc
    try:
        return dataclasses.replace(config, **changes), changes
    except ConfigError as exc:  # a value the config refuses (__post_init__)
        raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from exc


def persisted_update(text: bytes) -> dict[str, str]:
    """What a ``configStorePath`` file written by an update sets that a running NameServer may
    change (the file holds every setting; the others stay the config file's).

    Raises:
        ConfigError: the file is not properties text.
    """
    props = parse_properties(text, "the persisted NameServer config")
    return {k: v for k, v in props.items() if camel_to_snake(k) in UPDATABLE}
