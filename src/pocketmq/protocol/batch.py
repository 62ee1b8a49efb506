"""The body of a SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages / decodeMessages). No I/O
here.

Each message: total size (4) | magic (4) | body CRC (4) | flag (4) | body length (4) | body
| properties length (2) | properties. The broker fills in the magic code and body CRC, so
producers send both as 0.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from pocketmq.errors import ProtocolError
from pocketmq.protocol import native
from pocketmq.protocol.message import Message, MessageExt
from pocketmq.protocol.properties import decode_properties, encode_properties

_BATCH_HEAD = struct.Struct(">iiiii")  # total size, magic, body CRC, flag, body length
_H16 = struct.Struct(">h")


def encode_batch_body_py(messages: Iterable[Message]) -> bytes:
    """The body of a batch send of ``messages``. The pure-Python reference of
    pocketmq._speedups; call ``encode_batch_body``."""
    parts: list[bytes] = []
    for m in messages:
        props = encode_properties(m.properties).encode()
        size = _BATCH_HEAD.size + len(m.body) + _H16.size + len(props)
        parts += (_BATCH_HEAD.pack(size, 0, 0, m.flag, len(m.body)), m.body)
        parts += (_H16.pack(len(props)), props)
    return b"".join(parts)


def decode_batch_body_py(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """Split a batch send's body (see ``encode_batch_body``) into (flag, body, properties).
    The pure-Python reference of pocketmq._speedups; call ``decode_batch_body``.

    Raises:
        ProtocolError: a message overruns the body or its lengths disagree.
    """
    out = []
    pos = 0
    while pos < len(data):
        if pos + _BATCH_HEAD.size > len(data):
            raise ProtocolError(f"batch message at byte {pos} is truncated")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
        p = pos + _BATCH_HEAD.size
        if body_len < 0 or p + body_len + 2 > len(data):
            raise ProtocolError(f"batch message at byte {pos}: body overruns the batch")
        body = data[p : p + body_len]
        p += body_len
        props_len = _H16.unpack_from(data, p)[0]
        p += 2
        if props_len < 0 or p + props_len > len(data):
            raise ProtocolError(f"batch message at byte {pos}: properties overrun the batch")
        props = decode_properties(data[p : p + props_len].decode("utf-8", "replace"))
        p += props_len
        if total != p - pos:
            raise ProtocolError(f"batch message at byte {pos} says {total} bytes, has {p - pos}")
        out.append((flag, body, props))
        pos = p
    return out


def batch_messages_py(base: MessageExt, body: bytes) -> list[MessageExt]:
    """The messages of a batch send's body: each the base put again (``put_again``: its topic,
    queue, sys flag, born and host fields) with the entry's body and flag, and the entry's
    properties over the base's. The pure-Python reference of pocketmq._speedups; call
    ``batch_messages``.

    Raises:
        ProtocolError: as ``decode_batch_body``.
    """
    out = []
    for flag, entry_body, props in decode_batch_body(body):
        msg = base.put_again(
            base.topic, base.queue_id, {**base.properties, **props}, base.reconsume_times
        )
        msg.body, msg.flag = entry_body, flag
        out.append(msg)
    return out


encode_batch_body: Final = native.select("encode_batch_body", encode_batch_body_py)
decode_batch_body: Final = native.select("decode_batch_body", decode_batch_body_py)
batch_messages: Final = native.select("batch_messages", batch_messages_py)
