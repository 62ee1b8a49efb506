"""A stored message as the apache.rocketmq.v2 ``Message`` a 5.x consumer reads (PullMessage,
ReceiveMessage). No I/O here.

The reverse of ``convert.to_message_ext``, with the system properties RocketMQ's proxy fills
(GrpcConverter.buildSystemProperties), so that what a 4.x or 5.x producer sent reads the same
to a 5.x consumer:

- ``message_id`` is the client's UNIQ_KEY, else the offset message id; ``tag``, ``keys`` and
  ``message_group`` come from TAGS, KEYS and ``__SHARDINGKEY``.
- The type is TRANSACTION, DELAY, FIFO or NORMAL, in that order of precedence. A delivered timer
  message no longer has TIMER_DELIVER_MS (the timer service keeps the time in TIMER_OUT_MS),
  so both give it its ``delivery_timestamp``.
- The body goes out uncompressed, with IDENTITY encoding and the MD5 digest of those bytes.
  The proxy passes a 4.x compressed body on marked GZIP, although 4.x producers compress with
  zlib, not gzip: that works only with clients that sniff the format from the first bytes.
- ``born_host`` is the producer's IP address and ``store_host`` the broker's ``ip:port``, as
  the proxy writes them; ``delivery_attempt`` counts the deliveries so far, this one included.
- User properties are every property that is not one of the broker's own names.
"""

from __future__ import annotations

import hashlib
import zlib

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.grpc.convert import RESERVED_PROPERTIES
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, create_offset_msg_id
from pocketmq.protocol.properties import KEY_SEPARATOR

# A compressed body is inflated only up to this size, so that a small record cannot make the
# broker allocate without bound; it is far above any producer's body limit (4 MiB by default).
MAX_INFLATED_BODY_BYTES = 64 << 20


def set_ms(target: Timestamp | Duration, ms: int) -> None:
    """A Timestamp (epoch ms) or Duration (ms) set in place: a message's nested fields are
    filled where they are, not built apart and copied in (a copy per field per message)."""
    target.seconds = ms // 1000
    target.nanos = (ms % 1000) * 1_000_000


def _int_property(props: dict[str, str], name: str) -> int | None:
    """A numeric property; None when it is absent or not a number (a 4.x producer may set any
    property, and one bad value must not make its message unreadable)."""
    try:
        return int(props[name])
    except (KeyError, ValueError):
        return None


def _body(msg: MessageExt) -> bytes:
    """The body as the producer gave it. A body flagged compressed that does not inflate
    (or inflates past the bound) goes out as stored: the consumer gets the bytes the
    producer wrote rather than nothing, and the queue does not stall on it."""
    if not msg.sys_flag & SysFlag.COMPRESSED:
        return msg.body
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(msg.body, MAX_INFLATED_BODY_BYTES)
    except zlib.error:
        return msg.body
    return body if inflater.eof else msg.body


def _delivery_ms(props: dict[str, str]) -> int | None:
    deliver_ms = _int_property(props, MessageConst.TIMER_DELIVER_MS)
    return _int_property(props, MessageConst.TIMER_OUT_MS) if deliver_ms is None else deliver_ms


def _message_type(props: dict[str, str], delivery_ms: int | None) -> pb.MessageType:
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if (
        delivery_ms is not None
        or MessageConst.DELAY_TIME_LEVEL in props
        or MessageConst.TIMER_DELAY_SEC in props
    ):
        return pb.DELAY
    if MessageConst.SHARDING_KEY in props:
        return pb.FIFO
    return pb.NORMAL


def v2_message(
    msg: MessageExt, *, queue_id: int, queue_offset: int, topic: str | None = None
) -> pb.Message:
    """The v2 message a consumer receives for a stored one.

    Args:
        msg: the stored message, as ``decode_message`` returns it.
        queue_id: the queue the consumer reads it from.
        queue_offset: its offset in that queue.
        topic: the topic to report when it is not the one the message is stored in (a retry
            topic's message reports the topic it was first sent to).

    Returns:
        The message with its body, system properties and user properties.
    """
    props = msg.properties
    body = _body(msg)
    delivery_ms = _delivery_ms(props)
    message = pb.Message(body=body)
    message.topic.name = topic or msg.topic
    user = {k: v for k, v in props.items() if k not in RESERVED_PROPERTIES}
    if user:
        message.user_properties.update(user)
    sp = message.system_properties
    sp.message_id = msg.uniq_key or create_offset_msg_id(msg.store_host, msg.phy_offset)
    digest = sp.body_digest
    digest.type = pb.MD5
    digest.checksum = hashlib.md5(body, usedforsecurity=False).hexdigest().upper()
    sp.body_encoding = pb.IDENTITY
    sp.message_type = _message_type(props, delivery_ms)
    set_ms(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = msg.born_host[0]
    set_ms(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
    sp.queue_id = queue_id
    sp.queue_offset = queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    if msg.tags is not None:
        sp.tag = msg.tags
    if msg.keys:
        sp.keys.extend(key for key in msg.keys.split(KEY_SEPARATOR) if key)
    if MessageConst.SHARDING_KEY in props:
        sp.message_group = props[MessageConst.SHARDING_KEY]
    if delivery_ms is not None:
        set_ms(sp.delivery_timestamp, delivery_ms)
    return message
