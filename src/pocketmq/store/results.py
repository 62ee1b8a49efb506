"""Status enums and result values returned by the store (expected outcomes are values)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from pocketmq.protocol.message import (
    Host,
    create_offset_msg_id,
    create_offset_msg_ids,
    host_to_bytes,
    offset_msg_ids_text,
)


class PutStatus(enum.Enum):
    """PutMessageStatus: how a put ended."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # written, but not durable within the timeout
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # store shut down, read-only or disk full
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"  # no room for a new segment
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # too large, bad topic, empty batch
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    # Members are singletons compared by identity; Enum's own __hash__ is a Python call, and
    # every send's answer looks its status up (PUT_STATUS_CODES).
    __hash__ = object.__hash__


@dataclass(slots=True)
class PutResult:
    status: PutStatus
    # Commitlog offsets of the records written (one per message of a batch).
    phy_offsets: list[int] = field(default_factory=list)
    # Queue offset of the first message; the others follow consecutively.
    queue_offset: int = -1
    wrote_bytes: int = 0
    store_timestamp: int = 0
    store_host: Host = ("127.0.0.1", 0)
    # Why the put failed, for the error response.
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def phy_offset(self) -> int:
        return self.phy_offsets[0] if self.phy_offsets else -1

    @property
    def msg_num(self) -> int:
        return len(self.phy_offsets)

    @property
    def msg_ids(self) -> list[str]:
        return create_offset_msg_ids(self.store_host, self.phy_offsets)

    @property
    def msg_ids_text(self) -> str:
        """``msg_ids`` comma-separated, as a batch's send answer carries them."""
        return offset_msg_ids_text(host_to_bytes(self.store_host), self.phy_offsets)

    @property
    def msg_id(self) -> str:
        return create_offset_msg_id(self.store_host, self.phy_offset) if self.phy_offsets else ""

    @property
    def next_offset(self) -> int:
        """Commitlog offset just past this put: what a SYNC_FLUSH put waits to be durable."""
        return self.phy_offsets[0] + self.wrote_bytes if self.phy_offsets else 0


class GetStatus(enum.Enum):
    """GetMessageStatus."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    # The records found, whole and back to back in queue order, as a PULL answer's body carries
    # them (a copy, safe to keep).
    body: bytes = b""
    # (queue offset, size) of each record in body, as native int64 pairs (store.pull_scan).
    units: bytes = b""
    # The CommitLog bytes after the last unit read exceed the memory reads may use: the
    # group had better read from a slave (GetMessageResult.suggestPullingFromSlave).
    suggest_pulling_from_slave: bool = False

    @property
    def queue_offsets(self) -> list[int]:
        """Queue offset of each record in ``body``."""
        return memoryview(self.units).cast("q")[::2].tolist()

    @property
    def messages(self) -> list[bytes]:
        """Each record of ``body`` (copies made on each call)."""
        out = []
        pos = 0
        for size in memoryview(self.units).cast("q")[1::2].tolist():
            out.append(self.body[pos : pos + size])
            pos += size
        return out

    @property
    def message_count(self) -> int:
        """How many records ``body`` holds (``units`` has two int64 per record)."""
        return len(self.units) // 16

    @property
    def buffer_total_size(self) -> int:
        return len(self.body)


@dataclass(slots=True)
class QueryResult:
    """Records found by key, plus how fresh the index was."""

    messages: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int
