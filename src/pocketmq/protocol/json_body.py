"""JSON bodies as RocketMQ's Java side writes them. No I/O here.

fastjson writes maps with integer keys without quotes (``"brokerAddrs":{0:"host:port"}``),
and maps keyed by a bean (``Map<MessageQueue, V>`` in ConsumeStats, TopicStatsTable,
ResetOffsetBody) with the bean itself as the key:
``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``. Strict parsers reject
both. ``loads`` accepts them, turning an object key into a string key holding its JSON text.
``dumps`` always writes standard JSON, which every client we know parses; ``dumps_object_keys``
writes bean keys the fastjson way, for bodies whose Java readers only ever saw that form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from pocketmq.errors import RemoteProtocolError

# An unquoted integer object key: after "{" or ",", before ":". Applied only when strict parsing
# failed, and only outside string literals.
_UNQUOTED_INT_KEY = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')
# The tokens that matter for finding object keys: string literals (skipped whole) and braces.
_STRING_OR_BRACE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}]')
_FOLLOWED_BY_COLON = re.compile(r"\s*:")


class ObjectKey(str):
    """A map key fastjson writes as a JSON object, not a string; its text is that object."""


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> ObjectKey:
    """The key fastjson writes for a MessageQueue (bean fields in name order, no spaces)."""
    text = orjson.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic})
    return ObjectKey(text.decode())


def parse_message_queue_key(key: str) -> tuple[str, str, int]:
    """Read a MessageQueue key as ``loads`` returns it.

    Returns:
        (topic, broker name, queue id).

    Raises:
        RemoteProtocolError: the key is not a MessageQueue object.
    """
    mq = loads(key)
    try:
        return str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteProtocolError(f"not a MessageQueue key: {key!r}") from exc


def _quote_int_keys(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        return f'{m.group(2)}"{m.group(3)}"{m.group(4)}'

    return _UNQUOTED_INT_KEY.sub(fix, text)


def _quote_object_keys(text: str) -> str:
    # A JSON value is never followed by ":", so a balanced {...} that is must be a key.
    opens: list[int] = []
    keys: list[tuple[int, int]] = []
    for m in _STRING_OR_BRACE.finditer(text):
        if m.group() == "{":
            opens.append(m.start())
        elif m.group() == "}" and opens:
            start, end = opens.pop(), m.end()
            if _FOLLOWED_BY_COLON.match(text, end):
                # Keys nested inside this one stay as they are, inside its text.
                while keys and keys[-1][0] > start:
                    keys.pop()
                keys.append((start, end))
    if not keys:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in keys:
        parts += (text[pos:start], orjson.dumps(text[start:end]).decode())
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def loads(body: bytes | str) -> Any:
    """Parse a request or response body.

    Raises:
        RemoteProtocolError: not JSON, even with fastjson's unquoted integer and object keys.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        text = body.decode() if isinstance(body, bytes) else body
        return orjson.loads(_quote_int_keys(_quote_object_keys(text)))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise RemoteProtocolError(f"body is not JSON: {exc}") from exc


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def dumps_object_keys(value: Any) -> bytes:
    """Like ``dumps``, but an ``ObjectKey`` of a map is written unquoted, as fastjson does.

    Maps and lists are searched for such keys (ConsumeStatsList nests ConsumeStats in lists);
    anything else goes through ``dumps`` unchanged.
    """
    if isinstance(value, list | tuple):
        return b"[" + b",".join(dumps_object_keys(item) for item in value) + b"]"
    if not isinstance(value, Mapping):
        return dumps(value)
    items = [
        (key.encode() if isinstance(key, ObjectKey) else dumps(str(key)))
        + b":"
        + dumps_object_keys(item)
        for key, item in value.items()
    ]
    return b"{" + b",".join(items) + b"}"
