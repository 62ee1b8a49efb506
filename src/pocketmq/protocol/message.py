"""Messages, their properties, the CommitLog record codec and message ids. No I/O here.

CommitLog record, RocketMQ 4.x layout (MessageDecoder / CommitLog.calMsgLength), big-endian::

    offset size  field
    0      4     TOTALSIZE            whole record, this field included
    4      4     MAGICCODE            daa320a7 (v1: 1-byte topic length) or daa320ab (v2: 2-byte)
    8      4     BODYCRC              CRC32 of the body & 0x7fffffff
    12     4     QUEUEID
    16     4     FLAG                 opaque to the broker, set by the producer
    20     8     QUEUEOFFSET          unit index in the consume queue
    28     8     PHYSICALOFFSET       byte position of this record in the CommitLog
    36     4     SYSFLAG              compression, multi tags, transaction type, IPv6 hosts
    40     8     BORNTIMESTAMP        producer clock, ms
    48     8|20  BORNHOST             IPv4 (4) + port (4), or IPv6 (16) + port (4)
    +      8     STORETIMESTAMP       broker clock, ms
    +      8|20  STOREHOSTADDRESS     as BORNHOST
    +      4     RECONSUMETIMES       (the seed's table says 8; RocketMQ's code writes 4)
    +      8     PREPARED TRANSACTION OFFSET
    +      4     BODY LENGTH, then the body
    +      1|2   TOPIC LENGTH, then the topic (UTF-8)
    +      2     PROPERTIES LENGTH (signed short), then the properties (UTF-8)

How records sit in a segment (blank record, zeros after the last): pocketmq.protocol.records.

Properties are ``name \\x01 value \\x02`` repeated, as MessageDecoder.messageProperties2String.
"""

from __future__ import annotations

import functools
import ipaddress
import mmap
import operator
import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

from pocketmq.errors import ProtocolError
from pocketmq.protocol import native

# Anything records are decoded from: bytes, or a mapped segment.
ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap

MESSAGE_MAGIC_CODE: Final = 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = 0xDAA320AB
BLANK_MAGIC_CODE: Final = 0xCBD43194

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
KEY_SEPARATOR: Final = " "

# Java's Short.MAX_VALUE: the properties length is a signed 16-bit field.
MAX_PROPERTIES_LENGTH: Final = 32767
# The v1 topic length is a signed byte in RocketMQ's decoder.
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_TOPIC_LENGTH: Final = 32767


class SysFlag:
    """MessageSysFlag bits."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x1 << 2
    TRANSACTION_COMMIT_TYPE = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
    BORNHOST_V6 = 0x1 << 4
    STOREHOSTADDRESS_V6 = 0x1 << 5
    NEED_UNWRAP = 0x1 << 6
    INNER_BATCH = 0x1 << 7

    @staticmethod
    def transaction_value(sys_flag: int) -> int:
        return sys_flag & SysFlag.TRANSACTION_ROLLBACK_TYPE


class PullSysFlag:
    """PullSysFlag bits of a PULL_MESSAGE's ``sysFlag`` header."""

    COMMIT_OFFSET = 0x1  # commit the carried commitOffset as the group's offset
    SUSPEND = 0x2  # long polling: hold the pull while nothing is new
    SUBSCRIPTION = 0x4  # filter by the carried subscription, not the heartbeat's
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


class MessageConst:
    """Property names (org.apache.rocketmq.common.message.MessageConst)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    # The producer's UNIQ_KEY, copied onto a stored half (TransactionalMessageUtil).
    TRANSACTION_ID = "__transactionId__"
    SHARDING_KEY = "__SHARDINGKEY"
    START_DELIVER_TIME = "__STARTDELIVERTIME"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    DUP_INFO = "DUP_INFO"
    # Stamped by the broker on every message it stores (SendMessageProcessor).
    CLUSTER = "CLUSTER"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    # Request-reply: set on a request by its producer, copied onto the reply by the replier.
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    MESSAGE_TYPE = "MSG_TYPE"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"


# MSG_TYPE of a reply message (MixAll.REPLY_MESSAGE_FLAG): a producer sends it with
# SEND_REPLY_MESSAGE_V2 and the broker pushes it to the requester.
REPLY_MESSAGE_FLAG: Final = "reply"


# The properties that ask for a delivery time (5.x timer messages, and the 4.x start deliver
# time): the timer service reads them; a transactional half may carry none.
TIMER_PROPERTIES: Final = (
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
    MessageConst.START_DELIVER_TIME,
)


def delay_property(properties: dict[str, str]) -> str | None:
    """The property by which a message asks for a later delivery, if any: a positive DELAY
    level (a level that is not a number counts as none, as the store reads it) or a non-empty
    timer property."""
    for name in (MessageConst.DELAY_TIME_LEVEL, *TIMER_PROPERTIES):
        value = properties.get(name)
        if not value:
            continue
        if name != MessageConst.DELAY_TIME_LEVEL:
            return name
        try:
            if int(value) > 0:
                return name
        except ValueError:
            pass
    return None


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


def body_crc(body: bytes | memoryview) -> int:
    """Body CRC as RocketMQ stores it (UtilAll.crc32: CRC32 & 0x7fffffff)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --- hosts and message ids ------------------------------------------------------------

Host = tuple[str, int]


@functools.lru_cache(maxsize=4096)
def host_to_bytes(host: Host) -> bytes:
    """Address bytes + 4-byte port, as written in records and offset message ids.

    Cached: parsing the address costs more than encoding the rest of a record, and a broker
    sees few distinct hosts (one per client connection, one for itself)."""
    ip, port = host
    return ipaddress.ip_address(ip).packed + port.to_bytes(4, "big")


def host_from_bytes(raw: ReadableBuffer) -> Host:
    addr = bytes(raw[:-4])
    port = int.from_bytes(raw[-4:], "big")
    if len(addr) == 4:
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}", port
    return str(ipaddress.IPv6Address(addr)), port


def create_offset_msg_id(store_host: Host, phy_offset: int) -> str:
    """The 16-byte (IPv4) or 28-byte (IPv6) offset message id, upper-case hex."""
    # Signed, as Java writes the long (and decode_offset_msg_id reads it back): a damaged
    # record may carry a negative PHYSICALOFFSET.
    return (host_to_bytes(store_host) + phy_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    """Split an offset message id into (store host, commitlog offset).

    Raises:
        ProtocolError: the id is not 32 or 56 hex digits.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ProtocolError(f"message id {msg_id!r} is not hexadecimal") from exc
    if len(raw) not in (16, 28):
        raise ProtocolError(f"message id {msg_id!r} must be 32 or 56 hex digits")
    return host_from_bytes(raw[:-8]), int.from_bytes(raw[-8:], "big", signed=True)


# --- messages ---------------------------------------------------------------------------


class _Properties:
    """The system properties both message kinds expose by name."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@dataclass(slots=True)
class Message(_Properties):
    """What a producer sends: topic, body, flag and properties."""

    topic: str
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class MessageExt(_Properties):
    """A message with its broker-side fields: what the store writes and decodes.

    Fields set by the store on append (queue_offset, phy_offset, store_timestamp, store_size,
    msg_id) are ignored on input.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int = 0
    queue_offset: int = 0
    phy_offset: int = 0
    store_size: int = 0
    body_crc: int = 0
    msg_id: str = ""

    def put_again(
        self, topic: str, queue_id: int, properties: dict[str, str], reconsume_times: int
    ) -> MessageExt:
        """This message to store once more elsewhere (a due delay, a retry, a dead letter):
        the producer's body, flags and born fields, and the store fields left to the store."""
        return MessageExt(
            topic=topic,
            body=self.body,
            queue_id=queue_id,
            flag=self.flag,
            properties=properties,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_host=self.store_host,
            reconsume_times=reconsume_times,
        )


# --- record codec -----------------------------------------------------------------------

# Offsets of fields read directly by recovery and tools.
POS_MAGIC: Final = 4
POS_BODY_CRC: Final = 8
POS_QUEUE_ID: Final = 12
POS_QUEUE_OFFSET: Final = 20
POS_PHY_OFFSET: Final = 28
POS_SYS_FLAG: Final = 36
POS_BORN_TIMESTAMP: Final = 40
POS_BORN_HOST: Final = 48

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_H16 = struct.Struct(">h")
_PREFIX = struct.Struct(">iIiiiqqiq")  # size .. born timestamp, 48 bytes


def record_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int) -> int:
    """CommitLog.calMsgLength for v1 records (v2 adds one byte for the topic length)."""
    born = 20 if sys_flag & SysFlag.BORNHOST_V6 else 8
    store = 20 if sys_flag & SysFlag.STOREHOSTADDRESS_V6 else 8
    topic_len_size = 1 if topic_len <= MAX_TOPIC_LENGTH_V1 else 2
    return (
        4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born
        + 8
        + store
        + 4
        + 8
        + 4
        + body_len
        + topic_len_size
        + topic_len
        + 2
        + properties_len
    )


def encode_record(msg: MessageExt, properties: bytes | None = None) -> bytearray:
    """Encode a whole record (used by tools and tests; the store writes in place).

    Raises:
        ProtocolError: topic or properties too long for the format.
    """
    try:
        props = encode_properties(msg.properties).encode() if properties is None else properties
        topic = msg.topic.encode()
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"topic and properties must be valid Unicode: {exc}") from exc
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise ProtocolError(f"properties are {len(props)} bytes, at most 32767 fit a record")
    if not topic or len(topic) > MAX_TOPIC_LENGTH:
        raise ProtocolError(f"topic must be 1..{MAX_TOPIC_LENGTH} bytes, got {len(topic)}")
    born = host_to_bytes(msg.born_host)
    store = host_to_bytes(msg.store_host)
    sys_flag = msg.sys_flag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
    if len(born) == 20:
        sys_flag |= SysFlag.BORNHOST_V6
    if len(store) == 20:
        sys_flag |= SysFlag.STOREHOSTADDRESS_V6
    v2 = len(topic) > MAX_TOPIC_LENGTH_V1
    total = record_length(sys_flag, len(msg.body), len(topic), len(props))
    out = bytearray()
    out += _PREFIX.pack(
        total,
        MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
        body_crc(msg.body),
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.phy_offset,
        sys_flag,
        msg.born_timestamp,
    )
    out += born
    out += _I64.pack(msg.store_timestamp)
    out += store
    out += _I32.pack(msg.reconsume_times)
    out += _I64.pack(msg.prepared_transaction_offset)
    out += _I32.pack(len(msg.body))
    out += msg.body
    out += len(topic).to_bytes(2 if v2 else 1, "big")
    out += topic
    out += _H16.pack(len(props))
    out += props
    return out


@dataclass(slots=True)
class RecordInfo:
    """What dispatch needs from a record, decoded without copying the body."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    size: int
    sys_flag: int
    store_timestamp: int
    tags: str | None
    keys: str | None
    uniq_key: str | None
    properties: dict[str, str]
    prepared_transaction_offset: int


class RecordError(ProtocolError):
    """A record does not decode; detail says why."""


def peek_record_size(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """Return (total size, magic code) of the record at pos, without validating it."""
    return _I32.unpack_from(buf, pos)[0], _U32.unpack_from(buf, pos + 4)[0]


def topic_field(buf: ReadableBuffer, pos: int, magic: int, end: int) -> tuple[int, int]:
    """Where a record's topic starts and how long it is, read at ``pos`` (just past the body):
    its length takes 1 byte in version-1 records and 2 in version-2 ones.

    Raises:
        RecordError: the length, the topic or the properties length after it overruns ``end``.
    """
    if magic == MESSAGE_MAGIC_CODE:
        if pos + 1 > end:
            raise RecordError("topic length overruns the record")
        topic_len, pos = buf[pos], pos + 1
    else:
        if pos + 2 > end:
            raise RecordError("topic length overruns the record")
        topic_len, pos = int.from_bytes(buf[pos : pos + 2], "big"), pos + 2
    if pos + topic_len + 2 > end:
        raise RecordError("topic overruns the record")
    return pos, topic_len


def decode_record_info(buf: ReadableBuffer, pos: int, limit: int, check_crc: bool) -> RecordInfo:
    """Decode the record starting at buf[pos], which must end by limit.

    Mirrors CommitLog.checkMessageAndReturnSize: magic, length consistency and (optionally)
    body CRC are checked.

    Raises:
        RecordError: anything inconsistent; the caller treats the rest of the file as garbage.
    """
    if limit - pos < 8:
        raise RecordError("truncated record header")
    total, magic = peek_record_size(buf, pos)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise RecordError(f"bad magic code {magic:08x}")
    if total < 91 or total > limit - pos:
        raise RecordError(f"record size {total} does not fit the {limit - pos} bytes left")
    (
        _,
        _,
        crc,
        queue_id,
        _flag,
        queue_offset,
        phy_offset,
        sys_flag,
        _born_ts,
    ) = _PREFIX.unpack_from(buf, pos)
    born_len = 20 if sys_flag & SysFlag.BORNHOST_V6 else 8
    store_len = 20 if sys_flag & SysFlag.STOREHOSTADDRESS_V6 else 8
    # Fixed fields up to and including BODY LENGTH; IPv6 hosts make them longer than 91 - 3.
    if 48 + born_len + 8 + store_len + 4 + 8 + 4 > total:
        raise RecordError(f"record size {total} is too small for its sys flag {sys_flag:#x}")
    p = pos + 48 + born_len
    store_timestamp = _I64.unpack_from(buf, p)[0]
    p += 8 + store_len
    prepared = _I64.unpack_from(buf, p + 4)[0]
    p += 12
    body_len = _I32.unpack_from(buf, p)[0]
    p += 4
    end = pos + total
    if body_len < 0 or p + body_len > end:
        raise RecordError(f"body length {body_len} overruns the record")
    if (
        check_crc
        and body_len > 0
        and zlib.crc32(memoryview(buf)[p : p + body_len]) & 0x7FFFFFFF != crc
    ):
        raise RecordError("body CRC mismatch")
    p += body_len
    p, topic_len = topic_field(buf, p, magic, end)
    topic = bytes(buf[p : p + topic_len]).decode("utf-8", "replace")
    p += topic_len
    props_len = _H16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise RecordError(
            f"length mismatch: record says {total} bytes, fields add up to {p + props_len - pos}"
        )
    props = decode_properties(bytes(buf[p:end]).decode("utf-8", "replace")) if props_len else {}
    return RecordInfo(
        topic=topic,
        queue_id=queue_id,
        queue_offset=queue_offset,
        phy_offset=phy_offset,
        size=total,
        sys_flag=sys_flag,
        store_timestamp=store_timestamp,
        tags=props.get(MessageConst.TAGS),
        keys=props.get(MessageConst.KEYS),
        uniq_key=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        properties=props,
        prepared_transaction_offset=prepared,
    )


def decode_message_py(
    buf: ReadableBuffer, pos: int = 0, check_crc: bool = False, *, inflate_body: bool = False
) -> MessageExt:
    """Decode a whole record into a MessageExt (MessageDecoder.decode). ``inflate_body``
    inflates a COMPRESSED body, as clients see it (MessageDecoder's deCompressBody); the sys
    flag keeps the bit.

    Raises:
        RecordError: the bytes are not a valid record, or a compressed body does not inflate.
    """
    limit = len(buf)
    info = decode_record_info(buf, pos, limit, check_crc)
    _, _, crc, queue_id, flag, _, _, sys_flag, born_ts = _PREFIX.unpack_from(buf, pos)
    p = pos + 48
    born_len = 20 if sys_flag & SysFlag.BORNHOST_V6 else 8
    born_host = host_from_bytes(buf[p : p + born_len])
    p += born_len + 8
    store_len = 20 if sys_flag & SysFlag.STOREHOSTADDRESS_V6 else 8
    store_host = host_from_bytes(buf[p : p + store_len])
    p += store_len
    reconsume = _I32.unpack_from(buf, p)[0]
    p += 12
    body_len = _I32.unpack_from(buf, p)[0]
    body = bytes(buf[p + 4 : p + 4 + body_len])
    if inflate_body and sys_flag & SysFlag.COMPRESSED:
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise RecordError(f"record at {pos}: compressed body does not inflate: {exc}") from exc
    return MessageExt(
        topic=info.topic,
        body=body,
        queue_id=queue_id,
        flag=flag,
        properties=info.properties,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=info.prepared_transaction_offset,
        store_timestamp=info.store_timestamp,
        queue_offset=info.queue_offset,
        phy_offset=info.phy_offset,
        store_size=info.size,
        body_crc=crc,
        msg_id=create_offset_msg_id(store_host, info.phy_offset),
    )


# The reference of pocketmq._speedups.decode_message, as the four functions above.
decode_message: Final = native.select("decode_message", decode_message_py)
