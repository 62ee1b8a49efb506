"""A record's properties read by name from its raw bytes, without decoding the others: what a
property filter (SQL92) reads for each record it checks. No I/O here; the record layout is
drawn in ``pocketmq.protocol.record_codec``."""

from __future__ import annotations

import struct

from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from pocketmq.protocol.record_codec import (
    POS_BORN_HOST,
    POS_MAGIC,
    POS_SYS_FLAG,
    RecordError,
    topic_field,
)

_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")
_SHORT = struct.Struct(">h")


class RecordProperties:
    """The properties of one whole record, read by name from its raw bytes: only the values
    asked for are decoded (what a property filter reads). ``get`` answers what
    ``decode_properties`` of the whole text would hold for the name, the last pair winning as
    in RocketMQ's decodeProperties; the name must not contain the separators.

    Raises:
        RecordError: (constructing) the record's lengths overrun it.
    """

    __slots__ = ("_raw",)

    def __init__(self, record: bytes) -> None:
        sys_flag = _INT.unpack_from(record, POS_SYS_FLAG)[0]
        p = POS_BORN_HOST + (20 if sys_flag & SysFlag.BORNHOST_V6 else 8) + 8
        p += (20 if sys_flag & SysFlag.STOREHOSTADDRESS_V6 else 8) + 12
        end = len(record)
        if p + 4 > end:
            raise RecordError("record too short for its header")
        p += 4 + _INT.unpack_from(record, p)[0]
        p, topic_len = topic_field(record, p, _UINT.unpack_from(record, POS_MAGIC)[0], end)
        p += topic_len
        props_len = _SHORT.unpack_from(record, p)[0]
        p += 2
        if props_len < 0 or p + props_len > end:
            raise RecordError(f"properties length {props_len} overruns the record")
        # A leading separator makes every pair, the first included, start with one.
        self._raw = PROPERTY_SEPARATOR.encode() + record[p : p + props_len]

    def get(self, name: str) -> str | None:
        key = f"{PROPERTY_SEPARATOR}{name}{NAME_VALUE_SEPARATOR}".encode()
        at = self._raw.rfind(key)
        if at < 0:
            return None
        start = at + len(key)
        end = self._raw.find(PROPERTY_SEPARATOR.encode(), start)
        # Separators are ASCII: a value decodes alone exactly as within the whole text.
        return self._raw[start : end if end >= 0 else None].decode("utf-8", "replace")
