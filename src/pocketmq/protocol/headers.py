"""Reading request headers (extFields) the way RocketMQ's decodeCommandCustomHeader does.

Values arrive as strings (the C++ client also sends JSON numbers, already turned into strings
by the codec). A required field that is missing or malformed raises RequestError, which the
transport answers with SYSTEM_ERROR and a remark naming the field, as RocketMQ does.
"""

from __future__ import annotations

from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import RemotingCommand


def get_str(cmd: RemotingCommand, name: str, default: str | None = None) -> str:
    value = cmd.ext_fields.get(name)
    if value is None:
        if default is not None:
            return default
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
    return value


def get_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    value = cmd.ext_fields.get(name)
    if value is None or value == "":
        if default is not None:
            return default
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
    try:
        return int(value)
    except ValueError:
        try:
            return int(float(value))
        except (ValueError, OverflowError):  # OverflowError: "inf", "1e400"
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is not a number: {value!r}"
            ) from None


def get_bool(cmd: RemotingCommand, name: str, default: bool = False) -> bool:
    value = cmd.ext_fields.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() == "true"
