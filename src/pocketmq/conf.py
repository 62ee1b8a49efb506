"""Reading RocketMQ-style ``.properties`` files into the role config dataclasses.

RocketMQ names settings in camelCase (``flushDiskType``, ``mappedFileSizeCommitLog``); our
dataclasses use the same names in snake_case. One function maps between them, so a
``broker.conf`` written for RocketMQ configures pocketmq unchanged.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from jproperties import Properties  # type: ignore[import-untyped]

from pocketmq.errors import ConfigError

T = TypeVar("T")

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def camel_to_snake(name: str) -> str:
    """``checkCRCOnRecover`` -> ``check_crc_on_recover``, ``brokerIP1`` -> ``broker_ip1``."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def snake_to_camel(name: str) -> str:
    """``retry_max_times`` -> ``retryMaxTimes``: RocketMQ's JSON field names."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# RocketMQ's names that keep an acronym in capitals (snake_to_camel would not restore them).
_ACRONYM_NAMES = {"broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2",
                  "check_crc_on_recover": "checkCRCOnRecover"}  # fmt: skip


def property_name(field_name: str) -> str:
    """A dataclass field's RocketMQ property name: ``broker_ip1`` -> ``brokerIP1``."""
    return _ACRONYM_NAMES.get(field_name) or snake_to_camel(field_name)


def format_value(value: object) -> str:
    """A setting as RocketMQ prints it in a properties text (booleans lower case, enums by
    name)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def check_port(name: str, port: int) -> None:
    """A port setting of a server role (0: any free one).

    Raises:
        ConfigError: outside 0..65535.
    """
    if not 0 <= port < 65536:
        raise ConfigError(f"{name} must be 0..65535, got {port}")


def read_properties(path: Path | str) -> dict[str, str]:
    """Parse a Java properties file.

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    return parse_properties(data, f"config file {path}")


def parse_properties(data: bytes, what: str = "properties") -> dict[str, str]:
    """Parse Java properties text (UTF-8), as RocketMQ's MixAll.string2Properties does.

    Raises:
        ConfigError: the text cannot be parsed (what names it in the message).
    """
    props = Properties()
    try:
        props.load(data, "utf-8")
    except Exception as exc:  # jproperties raises its own parse errors
        raise ConfigError(f"cannot parse {what}: {exc}") from exc
    return {str(k): str(v.data).strip() for k, v in props.items()}


def convert_value(owner: str, name: str, raw: str, annotation: Any) -> Any:
    """Convert one textual setting to the field's type; ConfigError names the field."""
    target = annotation
    origin = typing.get_origin(target)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(target) if a is not type(None)]
        target = options[0]
    try:
        if target is bool:
            lowered = raw.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if target is int:
            return int(raw.strip())
        if target is float:
            return float(raw.strip())
        if target is Path:
            return Path(raw.strip()).expanduser()
        if isinstance(target, type) and issubclass(target, enum.Enum):
            return target[raw.strip().upper()]
        if target is str:
            return raw
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"{owner}.{name}: cannot use {raw!r} ({exc})") from exc
    raise ConfigError(f"{owner}.{name}: settings of type {target!r} cannot be read from text")


def fields_from_properties(cls: type[T], props: dict[str, str]) -> dict[str, Any]:
    """Pick the properties that name fields of the dataclass cls, converted to their types."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, raw in props.items():
        name = camel_to_snake(key)
        if name in known:
            values[name] = convert_value(cls.__name__, name, raw, hints[name])
    return values
