"""Messages, their system property names and flags, hosts and message ids. No I/O here.

The CommitLog record codec is pocketmq.protocol.record_codec; the properties codec and the
hash codes derived from property values are pocketmq.protocol.properties.
"""

from __future__ import annotations

import functools
import ipaddress
import mmap
from dataclasses import dataclass, field
from typing import Final

from pocketmq.errors import ProtocolError
from pocketmq.protocol import native

# Anything records are decoded from: bytes, or a mapped segment.
ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap


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


def delay_level(properties: dict[str, str]) -> int:
    """The DELAY level a message asks for; 0 for none, and for a level that is not a number
    (as the store reads it)."""
    try:
        return int(properties.get(MessageConst.DELAY_TIME_LEVEL, "0") or 0)
    except ValueError:
        return 0


def delay_property(properties: dict[str, str]) -> str | None:
    """The property by which a message asks for a later delivery, if any: a positive DELAY
    level or a non-empty timer property."""
    if delay_level(properties) > 0:
        return MessageConst.DELAY_TIME_LEVEL
    for name in TIMER_PROPERTIES:
        if properties.get(name):
            return name
    return None


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


def create_offset_msg_ids(store_host: Host, phy_offsets: list[int]) -> list[str]:
    """``create_offset_msg_id`` of each offset (a batch's ids), the host encoded once."""
    host = host_to_bytes(store_host).hex().upper()
    return [f"{host}{phy & 0xFFFFFFFFFFFFFFFF:016X}" for phy in phy_offsets]


def offset_msg_ids_text_py(host: bytes, phy_offsets: list[int]) -> str:
    """The offset message ids of ``phy_offsets`` on ``host`` (``host_to_bytes``'s form),
    comma-separated, as a batch's send answer carries them in ``msgId``. The pure-Python
    reference of pocketmq._speedups; call ``offset_msg_ids_text``."""
    prefix = host.hex().upper()
    return ",".join([f"{prefix}{phy & 0xFFFFFFFFFFFFFFFF:016X}" for phy in phy_offsets])


offset_msg_ids_text: Final = native.select("offset_msg_ids_text", offset_msg_ids_text_py)


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
