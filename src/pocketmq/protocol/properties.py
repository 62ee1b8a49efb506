"""Message properties (``name \\x01 value \\x02`` repeated, as
MessageDecoder.messageProperties2String) and the Java hash codes derived from property values
(tag codes, index keys). No I/O here.
"""

from __future__ import annotations

import operator
import struct
from typing import Final

from pocketmq.protocol import native

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
KEY_SEPARATOR: Final = " "


# The four functions below are the pure-Python references of pocketmq._speedups; the public
# names (bound by native.select) are the ones to call.


def encode_properties_py(properties: dict[str, str]) -> str:
    """Encode properties as RocketMQ does, with a trailing separator after each pair."""
    if not properties:
        return ""
    return "".join(
        [f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items()]
    )


def decode_properties_py(text: str) -> dict[str, str]:
    """Decode a properties string; pairs without a name/value separator are skipped."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            result[name] = value
    return result


# --- Java String.hashCode ----------------------------------------------------------------

_MASK32: Final = 0xFFFFFFFF
_MAX_POW: Final = 4096
# 31**k mod 2**32 for k = _MAX_POW-1 .. 0: a string of n code units hashes to the dot product
# of its codes with the last n entries.
_POWERS_DESC: Final = [pow(31, k, 1 << 32) for k in range(_MAX_POW - 1, -1, -1)]


def java_string_hash_py(s: str) -> int:
    """Java's String.hashCode (signed 32-bit) over the UTF-16 code units of s."""
    codes: bytes | tuple[int, ...]
    if s.isascii():
        codes = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be")
        codes = struct.unpack(f">{len(raw) // 2}H", raw)
    if len(codes) <= _MAX_POW:
        # map() keeps the per-character work in C: this runs for every indexed key.
        h: int = sum(map(operator.mul, codes, _POWERS_DESC[_MAX_POW - len(codes) :])) & _MASK32
    else:
        h = 0
        for c in codes:
            h = (31 * h + c) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_hash_concat_py(prefix_hash: int, s: str) -> int:
    """hashCode of prefix + s from the prefix's hashCode, hashing only s."""
    if not s.isascii():
        raw = s.encode("utf-16-be")
        n = len(raw) // 2
    else:
        n = len(s)
    power = pow(31, n, 1 << 32) if n >= _MAX_POW else _POWERS_DESC[_MAX_POW - 1 - n]
    h = ((prefix_hash & _MASK32) * power + (java_string_hash_py(s) & _MASK32)) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


encode_properties: Final = native.select("encode_properties", encode_properties_py)
decode_properties: Final = native.select("decode_properties", decode_properties_py)
java_string_hash: Final = native.select("java_string_hash", java_string_hash_py)
java_string_hash_concat: Final = native.select(
    "java_string_hash_concat", java_string_hash_concat_py
)


_TAGS_CODE_CACHE: dict[str, int] = {}


def tags_code(tags: str | None) -> int:
    """Consume-queue tag hash (MessageExtBrokerInner.tagsString2tagsCode)."""
    if not tags:
        return 0
    code = _TAGS_CODE_CACHE.get(tags)
    if code is None:
        if len(_TAGS_CODE_CACHE) > 65536:
            _TAGS_CODE_CACHE.clear()
        code = _TAGS_CODE_CACHE[tags] = java_string_hash(tags)
    return code
