"""JSON bodies as RocketMQ's Java side writes them. No I/O here.

fastjson writes maps with integer keys without quotes (``"brokerAddrs":{0:"host:port"}``),
which strict parsers reject. ``loads`` accepts that form; ``dumps`` always writes standard JSON,
which every client we know parses.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from pocketmq.errors import RemoteProtocolError

# An unquoted integer object key: after "{" or ",", before ":". Applied only when strict parsing
# failed, and only outside string literals.
_UNQUOTED_INT_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')


def _quote_int_keys(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        return f'{m.group(2)}"{m.group(3)}"{m.group(4)}'

    return _UNQUOTED_INT_KEY.sub(fix, text)


def loads(body: bytes | str) -> Any:
    """Parse a request or response body.

    Raises:
        RemoteProtocolError: not JSON, even with fastjson's unquoted integer keys.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        text = body.decode() if isinstance(body, bytes) else body
        return orjson.loads(_quote_int_keys(text))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise RemoteProtocolError(f"body is not JSON: {exc}") from exc


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
