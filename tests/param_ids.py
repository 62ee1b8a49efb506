"""Test ids of parametrized cases whose values are arbitrary objects."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def case_id(value: object) -> str:
    """``repr(value)`` without object addresses, at most 80 characters: the pytest-xdist
    workers collect the suite each on its own and must agree on every test's id."""
    return _ADDRESS.sub("", repr(value))[:80]
