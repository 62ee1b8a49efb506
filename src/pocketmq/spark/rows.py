"""Row schemas of the data sources and the Arrow batches their readers yield.

Readers yield ``pyarrow.RecordBatch`` es rather than tuples: Spark takes them as they are,
which spares a Python conversion per row. A record goes into the columns in one call,
``add_record`` (in C when the extension is active: pocketmq.protocol.native). No I/O here.

Schema of ``format("pocketmq")``, and how it maps to Spark's Kafka source::

    column           type                 Kafka source column
    topic            string               topic
    broker           string               -  (a queue is broker name + queue id)
    queue_id         int                  partition
    queue_offset     long                 offset
    msg_id           string               -  (UNIQ_KEY, else the broker's offset id)
    keys             string               key  (RocketMQ keys, space-separated)
    tags             string               -
    body             binary               value
    properties       map<string,string>   headers (all properties, system ones included)
    born_timestamp   timestamp            -  (producer clock)
    store_timestamp  timestamp            timestamp  (broker clock, timestampType 0)
    reconsume_times  int                  -

``format("pocketmq-store")`` adds ``phy_offset long`` (the record's CommitLog offset) and
``sys_flag int`` (compression, transaction type, IPv6 hosts).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]

from pocketmq.protocol.message import MessageConst, MessageExt, ReadableBuffer, SysFlag
from pocketmq.protocol.native import select
from pocketmq.protocol.properties import decode_properties
from pocketmq.protocol.record_codec import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordError,
    decode_message,
    topic_field,
)
from pocketmq.protocol.records import MIN_RECORD_SIZE

READ_SCHEMA: Final = (
    "topic string, broker string, queue_id int, queue_offset bigint, msg_id string, "
    "keys string, tags string, body binary, properties map<string,string>, "
    "born_timestamp timestamp, store_timestamp timestamp, reconsume_times int"
)
STORE_SCHEMA: Final = READ_SCHEMA + ", phy_offset bigint, sys_flag int"

_TS = pa.timestamp("us", tz="UTC")
_READ_FIELDS: Final = [
    pa.field("topic", pa.string()),
    pa.field("broker", pa.string()),
    pa.field("queue_id", pa.int32()),
    pa.field("queue_offset", pa.int64()),
    pa.field("msg_id", pa.string()),
    pa.field("keys", pa.string()),
    pa.field("tags", pa.string()),
    pa.field("body", pa.binary()),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
    pa.field("born_timestamp", _TS),
    pa.field("store_timestamp", _TS),
    pa.field("reconsume_times", pa.int32()),
]
_STORE_FIELDS: Final = [pa.field("phy_offset", pa.int64()), pa.field("sys_flag", pa.int32())]
READ_ARROW_SCHEMA: Final = pa.schema(_READ_FIELDS)
STORE_ARROW_SCHEMA: Final = pa.schema(_READ_FIELDS + _STORE_FIELDS)

# A record's fixed fields when both hosts are IPv4 (nearly always): size .. body length.
_FIXED_V4: Final = struct.Struct(">iIiiiqqiq8sq8siqi")
_H16: Final = struct.Struct(">h")
_V6_HOSTS: Final = SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6

# Rows per RecordBatch: large enough to amortise the conversion, small enough to stream.
BATCH_ROWS: Final = 4096


def inflate(msg: MessageExt) -> bytes:
    """The body as the producer sent it (compressed bodies are inflated)."""
    if msg.sys_flag & SysFlag.COMPRESSED:
        return zlib.decompress(msg.body)
    return msg.body


class RowBuffer:
    """Collects messages column by column and turns them into RecordBatches."""

    def __init__(self, *, include_properties: bool, store_columns: bool) -> None:
        self.include_properties = include_properties
        self.store_columns = store_columns
        self.schema = STORE_ARROW_SCHEMA if store_columns else READ_ARROW_SCHEMA
        self._reset()

    def _reset(self) -> None:
        self.columns: list[list[Any]] = [[] for _ in self.schema]

    def __len__(self) -> int:
        return len(self.columns[0])

    def truncate(self, rows: int) -> None:
        """Forget the rows added after the first ``rows``."""
        for col in self.columns:
            del col[rows:]

    def add_record(
        self, buf: ReadableBuffer, pos: int, limit: int, topic: str | None, broker: str | None
    ) -> tuple[int, int, int]:
        """``add_record`` of the record at buf[pos] (ending by limit) into these columns."""
        return add_record(
            self.columns, self.include_properties, self.store_columns, buf, pos, limit, topic,
            broker,
        )  # fmt: skip

    def flush(self) -> pa.RecordBatch:
        """The collected rows as one RecordBatch; the buffer starts empty again."""
        arrays = [
            pa.array(col, type=f.type) for col, f in zip(self.columns, self.schema, strict=True)
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def add_record_py(
    columns: list[list[Any]], include_properties: bool, store_columns: bool,
    buf: ReadableBuffer, pos: int, limit: int, topic: str | None, broker: str | None,
) -> tuple[int, int, int]:  # fmt: skip
    """Decode the CommitLog record at buf[pos] (ending by limit) straight into ``columns`` (a
    RowBuffer's: READ_ARROW_SCHEMA's, and STORE_ARROW_SCHEMA's two more when
    ``store_columns``), as a consumer sees it: body inflated, msg_id the UNIQ_KEY if there is
    one. ``topic`` replaces the record's topic when given (a retry queue's records name the
    original). Appends nothing unless the record decodes.

    One struct unpack and no MessageExt: this is the readers' inner loop (and the reference of
    the extension's, which takes the records with IPv4 hosts and a body as stored). Records
    with IPv6 hosts take decode_message.

    Returns:
        (record size, its phy_offset, its queue_offset).

    Raises:
        RecordError: the record's lengths are inconsistent.
        zlib.error: a compressed body does not inflate.
    """
    if limit - pos < _FIXED_V4.size:
        raise RecordError(f"truncated record: {limit - pos} bytes left")
    (
        total, magic, _crc, queue_id, _flag, queue_offset, phy_offset, sys_flag, born_ts,
        _born_host, store_ts, store_host, reconsume, _prepared, body_len,
    ) = _FIXED_V4.unpack_from(buf, pos)  # fmt: skip
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise RecordError(f"bad magic code {magic:08x}")
    if total < MIN_RECORD_SIZE or total > limit - pos:
        raise RecordError(f"record size {total} does not fit the {limit - pos} bytes left")
    if sys_flag & _V6_HOSTS:
        # The fixed fields after the born host sit elsewhere: the decoded message has them.
        msg = decode_message(bytes(buf[pos : pos + total]))
        body = inflate(msg)
        props = msg.properties
        msg_id = msg.uniq_key or msg.msg_id
        topic = topic or msg.topic
        store_ts, reconsume = msg.store_timestamp, msg.reconsume_times
    else:
        end = pos + total
        p = pos + _FIXED_V4.size
        if body_len < 0 or p + body_len > end:
            raise RecordError(f"body length {body_len} overruns the record")
        body = bytes(buf[p : p + body_len])
        p += body_len
        p, topic_len = topic_field(buf, p, magic, end)
        if topic is None:
            topic = bytes(buf[p : p + topic_len]).decode("utf-8", "replace")
        p += topic_len
        props_len = _H16.unpack_from(buf, p)[0]
        p += 2
        if props_len < 0 or p + props_len != end:
            raise RecordError(f"length mismatch: record says {total} bytes")
        props = decode_properties(bytes(buf[p:end]).decode("utf-8", "replace")) if props_len else {}
        if sys_flag & SysFlag.COMPRESSED:
            body = zlib.decompress(body)
        msg_id = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or (
            (store_host + phy_offset.to_bytes(8, "big", signed=True)).hex().upper()
        )
    c = columns
    c[0].append(topic)
    c[1].append(broker)
    c[2].append(queue_id)
    c[3].append(queue_offset)
    c[4].append(msg_id)
    c[5].append(props.get("KEYS"))
    c[6].append(props.get("TAGS"))
    c[7].append(body)
    c[8].append(props if include_properties else None)
    c[9].append(born_ts * 1000)
    c[10].append(store_ts * 1000)
    c[11].append(reconsume)
    if store_columns:
        c[12].append(phy_offset)
        c[13].append(sys_flag)
    return total, phy_offset, queue_offset


add_record = select("add_record", add_record_py)
