"""The remote-address patterns of plain_acl.yml (RocketMQ's RemoteAddressStrategyFactory), for
``globalWhiteRemoteAddresses`` and an account's ``whiteRemoteAddress``. No I/O here.

=======================================  ===============================================
pattern                                  matches
=======================================  ===============================================
empty                                    nothing
``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``  every address
``192.168.0.{1,2,3}``                    the listed last parts
``192.168.0.1,10.0.0.2``                 the listed addresses
``192.168.*``, ``192.168.1-9.*``,        addresses with that head whose first ``*`` or
``192.168.0.10-20``                      ``a-b`` part is in range (later parts: any)
``2001:db8::*``, ``2001:db8::1-ff``      the same for IPv6 groups (hexadecimal ranges)
``192.168.0.1``, ``::1``                 that address
=======================================  ===============================================
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from pocketmq.errors import ConfigError

AddressMatcher = Callable[[str], bool]
_EVERY = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def _normal(address: str) -> str | None:
    """An address in one spelling (IPv6 expanded), or None when it is no IP address."""
    try:
        return ipaddress.ip_address(address.strip()).exploded.upper()
    except ValueError:
        return None


def _one(address: str, pattern: str) -> str:
    normal = _normal(address)
    if normal is None:
        raise ConfigError(f"remote address pattern {pattern!r}: {address!r} is no IP address")
    return normal


def _set_matcher(addresses: set[str]) -> AddressMatcher:
    return lambda remote: _normal(remote) in addresses


def _range_bounds(part: str, pattern: str, *, base: int, top: int) -> tuple[int, int] | None:
    """The range of a ``*`` or ``a-b`` part; None for a literal part."""
    if part == "*":
        return 0, top
    if "-" not in part:
        return None
    low, _, high = part.partition("-")
    try:
        start, end = int(low, base), int(high, base)
    except ValueError:
        raise ConfigError(f"remote address pattern {pattern!r}: bad range {part!r}") from None
    if not 0 <= start <= end <= top:
        raise ConfigError(f"remote address pattern {pattern!r}: range {part!r} out of bounds")
    return start, end


def _range_matcher(pattern: str) -> AddressMatcher:
    ipv6 = ":" in pattern
    parts = [p.strip() for p in (_ipv6_parts(pattern) if ipv6 else pattern.split("."))]
    base, top, width = (16, 0xFFFF, 8) if ipv6 else (10, 255, 4)
    # Parts after the range may be left out: "192.168.*" is "192.168.*.*".
    if len(parts) > width:
        raise ConfigError(f"remote address pattern {pattern!r}: more than {width} parts")
    ranged = [
        (index, bounds)
        for index, part in enumerate(parts)
        if (bounds := _range_bounds(part, pattern, base=base, top=top)) is not None
    ]
    if not ranged:
        raise ConfigError(f"remote address pattern {pattern!r}: no range part")
    index, (low, high) = ranged[0]
    if index == 0 or not all(_is_number(p, base, top) for p in parts[:index]):
        raise ConfigError(f"remote address pattern {pattern!r}: bad address before the range")
    head = [int(p, base) for p in parts[:index]]

    def matches(remote: str) -> bool:
        try:
            addr = ipaddress.ip_address(remote.strip())
        except ValueError:
            return False
        if ipv6 != (addr.version == 6):
            return False
        if ipv6:
            values = [int(g, 16) for g in addr.exploded.split(":")]
        else:
            values = [int(o) for o in str(addr).split(".")]
        return values[:index] == head and low <= values[index] <= high

    return matches


def _is_number(part: str, base: int, top: int) -> bool:
    try:
        return 0 <= int(part, base) <= top
    except ValueError:
        return False


def _ipv6_parts(pattern: str) -> list[str]:
    """The 8 groups of an IPv6 pattern, ``::`` filled in with zeros."""
    if "::" in pattern:
        left, _, right = pattern.partition("::")
        lparts = left.split(":") if left else []
        rparts = right.split(":") if right else []
        return lparts + ["0"] * (8 - len(lparts) - len(rparts)) + rparts
    return pattern.split(":")


def compile_pattern(pattern: str | None) -> AddressMatcher:
    """The matcher of one pattern (see the table above).

    Raises:
        ConfigError: the pattern is malformed.
    """
    text = (pattern or "").strip()
    if not text:
        return lambda remote: False
    if text in _EVERY:
        return lambda remote: True
    if text.endswith("}"):
        head, brace, listed = text.rpartition("{")
        if not brace or not head or head[-1] not in ".:":
            raise ConfigError(f"remote address pattern {text!r}: expected head.{{a,b,...}}")
        return _set_matcher({_one(head + last.strip(), text) for last in listed[:-1].split(",")})
    if "," in text:
        return _set_matcher({_one(address, text) for address in text.split(",")})
    if "*" in text or "-" in text:
        return _range_matcher(text)
    return _set_matcher({_one(text, text)})
