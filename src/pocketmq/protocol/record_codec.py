"""The CommitLog record codec: encode and decode single records. No I/O here.

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
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass
from typing import Final

from pocketmq.errors import ProtocolError
from pocketmq.protocol import native
from pocketmq.protocol.message import (
    Host,
    MessageConst,
    MessageExt,
    ReadableBuffer,
    SysFlag,
    create_offset_msg_id,
    host_from_bytes,
    host_to_bytes,
)
from pocketmq.protocol.properties import decode_properties, encode_properties

MESSAGE_MAGIC_CODE: Final = 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = 0xDAA320AB
BLANK_MAGIC_CODE: Final = 0xCBD43194

# Java's Short.MAX_VALUE: the properties length is a signed 16-bit field.
MAX_PROPERTIES_LENGTH: Final = 32767
# The v1 topic length is a signed byte in RocketMQ's decoder.
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_TOPIC_LENGTH: Final = 32767


def body_crc(body: bytes | memoryview) -> int:
    """Body CRC as RocketMQ stores it (UtilAll.crc32: CRC32 & 0x7fffffff)."""
    return zlib.crc32(body) & 0x7FFFFFFF


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


# --- a put's records, encoded in one pass and placed in the log --------------------------
# encode_records_py and place_records_py are the pure-Python references of pocketmq._speedups;
# the public names (bound by native.select) are the ones to call.


class RecordEncodeError(ProtocolError):
    """A message cannot be stored as a record (MESSAGE_ILLEGAL); the message says why."""


class PropertiesTooLong(RecordEncodeError):
    """Properties past the record's signed 16-bit length (PROPERTIES_SIZE_EXCEEDED)."""


def _header_struct(born_len: int, store_len: int) -> struct.Struct:
    # TOTALSIZE magic crc queueId flag queueOffset phyOffset sysFlag bornTs bornHost storeTs
    # storeHost reconsumeTimes preparedTxOffset bodyLen
    return struct.Struct(f">iIiiiqqiQ{born_len}sq{store_len}siqi")


_HEADERS: Final = {(b, s): _header_struct(b, s) for b in (8, 20) for s in (8, 20)}
# The message's own fixed-width fields, as the header packs them: queueId flag sysFlag bornTs
# reconsumeTimes preparedTxOffset. Checked first, so that a value that does not fit is refused
# with the field's own error instead of the header's.
_MESSAGE_FIELDS: Final = struct.Struct(">iiiQiq")
_HOSTS_CACHED: Final = 4096
_OFFSETS: Final = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET
# The shortest record place_records reads: up to an IPv4 born host and the store timestamp.
_MIN_PLACED: Final = POS_BORN_HOST + 8 + 8


def encode_records_py(
    msgs: list[MessageExt],
    store_host: bytes,
    hosts: dict[Host, bytes],
    max_body_size: int,
    max_record_size: int,
) -> tuple[bytes, list[int], list[int]]:
    """The records of ``msgs``, back to back, as a put appends them, with QUEUEOFFSET,
    PHYSICALOFFSET and STORETIMESTAMP left 0 for :func:`place_records` to fill in.

    Args:
        msgs: the messages, in log order.
        store_host: the broker's address as ``host_to_bytes`` gives it (its length says v4/v6).
        hosts: a cache of ``host_to_bytes`` by born host, filled here (cleared past 4096).
        max_body_size: the largest body accepted.
        max_record_size: the largest record accepted (a segment less its closing blank).

    Returns:
        (the records, each record's size, each record's SYSFLAG with the IPv6 host bits).

    Raises:
        PropertiesTooLong: a message's properties take more than 32767 UTF-8 bytes.
        RecordEncodeError: any other message that cannot be a record: body or record too
            large, topic empty or too long, names not encodable, a field out of its range.
        ValueError, OverflowError: a born host that is not an IP address and port.
    """
    out: list[bytes] = []
    sizes: list[int] = []
    sys_flags: list[int] = []
    store_len = len(store_host)
    store_v6 = SysFlag.STOREHOSTADDRESS_V6 if store_len == 20 else 0
    for msg in msgs:
        body = msg.body
        if len(body) > max_body_size:
            raise RecordEncodeError(
                f"body is {len(body)} bytes, max_message_size is {max_body_size}"
            )
        try:
            props = encode_properties(msg.properties).encode()
        except UnicodeEncodeError:
            raise RecordEncodeError("properties are not valid Unicode") from None
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise PropertiesTooLong(f"properties are {len(props)} bytes, at most 32767 fit")
        try:
            topic = msg.topic.encode()
        except UnicodeEncodeError:
            raise RecordEncodeError("topic is not valid Unicode") from None
        if not topic or len(topic) > MAX_TOPIC_LENGTH:
            raise RecordEncodeError(f"topic must be 1..{MAX_TOPIC_LENGTH} bytes, got {len(topic)}")
        born = hosts.get(msg.born_host)
        if born is None:
            if len(hosts) >= _HOSTS_CACHED:
                hosts.clear()
            born = hosts[msg.born_host] = host_to_bytes(msg.born_host)
        sys_flag = msg.sys_flag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
        try:
            _MESSAGE_FIELDS.pack(
                msg.queue_id, msg.flag, sys_flag, msg.born_timestamp, msg.reconsume_times,
                msg.prepared_transaction_offset,
            )  # fmt: skip
        except struct.error as exc:
            raise RecordEncodeError(f"a field does not fit: {exc}") from None
        sys_flag |= store_v6 | (SysFlag.BORNHOST_V6 if len(born) == 20 else 0)
        v1 = len(topic) <= MAX_TOPIC_LENGTH_V1
        header = _HEADERS[(len(born), store_len)]
        size = header.size + len(body) + (1 if v1 else 2) + len(topic) + 2 + len(props)
        if size > max_record_size:
            raise RecordEncodeError(f"a {size}-byte record does not fit a commitlog segment")
        out += (
            header.pack(
                size,
                MESSAGE_MAGIC_CODE if v1 else MESSAGE_MAGIC_CODE_V2,
                body_crc(body),
                msg.queue_id,
                msg.flag,
                0,
                0,
                sys_flag,
                msg.born_timestamp,
                born,
                0,
                store_host,
                msg.reconsume_times,
                msg.prepared_transaction_offset,
                len(body),
            ),
            body,
            len(topic).to_bytes(1 if v1 else 2, "big"),
            topic,
            len(props).to_bytes(2, "big"),
            props,
        )
        sizes.append(size)
        sys_flags.append(sys_flag)
    return b"".join(out), sizes, sys_flags


def place_records_py(
    buf: bytearray | memoryview | mmap.mmap,
    pos: int,
    data: bytes,
    phy_offset: int,
    store_timestamp: int,
    queue_offsets: list[int],
) -> None:
    """Copy the records of :func:`encode_records` into ``buf`` at ``pos`` (the record at
    ``pos`` being at ``phy_offset`` in the log), each with its queue offset, its physical
    offset and ``store_timestamp``. The first record's TOTALSIZE goes in after every other
    byte, so that a process killed meanwhile leaves a zero size there: none of the records.

    Raises:
        ValueError: the records do not fit ``buf`` from ``pos``, or ``data`` is not exactly
            ``len(queue_offsets)`` records.
        struct.error: an offset or the timestamp does not fit a signed 64-bit field.
    """
    end = pos + len(data)
    if pos < 0 or end > len(buf):
        raise ValueError(f"{len(data)} bytes of records do not fit at {pos} of {len(buf)}")
    fields: list[tuple[int, int]] = []  # (record start in data, STORETIMESTAMP position)
    p = 0
    for _ in queue_offsets:
        if len(data) - p < _MIN_PLACED:
            raise ValueError(f"the record at {p} of the data is cut")
        size = _I32.unpack_from(data, p)[0]
        born_len = 20 if _I32.unpack_from(data, p + POS_SYS_FLAG)[0] & SysFlag.BORNHOST_V6 else 8
        ts_pos = POS_BORN_HOST + born_len
        if size < ts_pos + 8 or size > len(data) - p:
            raise ValueError(f"the record at {p} of the data says {size} bytes")
        fields.append((p, ts_pos))
        p += size
    if p != len(data) or not queue_offsets:
        raise ValueError(f"the data holds more than the {len(queue_offsets)} records given")
    for qo in queue_offsets:
        _OFFSETS.pack(qo, phy_offset)
    _OFFSETS.pack(store_timestamp, phy_offset + len(data))
    view = memoryview(data)
    buf[pos + 4 : end] = view[4:]
    for (start, ts_pos), qo in zip(fields, queue_offsets, strict=True):
        _OFFSETS.pack_into(buf, pos + start + POS_QUEUE_OFFSET, qo, phy_offset + start)
        _I64.pack_into(buf, pos + start + ts_pos, store_timestamp)
    buf[pos : pos + 4] = view[:4]


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


encode_records: Final = native.select("encode_records", encode_records_py)
place_records: Final = native.select("place_records", place_records_py)
decode_message: Final = native.select("decode_message", decode_message_py)
