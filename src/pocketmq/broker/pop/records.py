"""The records of the revive log (``rmq_sys_REVIVE_LOG_{cluster}``, queue 0) as typed values:
a checkpoint (tag ``ck``) per pop of one queue or change of invisible time, an ack record
(tag ``ack``) per ack, dead letter or revive.

Bodies are JSON with RocketMQ's field names (PopCheckPoint and AckMsg), so that a log reads
the same to RocketMQ's tools:

    checkpoint  so start offset, pt pop time, it invisible ms, bm ack bitmap (always 0),
                n message count, q queue id, t topic popped from, c group, ro revive offset
                (always 0), d queue offsets minus so, bn broker name; and ours: nb the offset
                past the popped range, rt reconsume times per message, o FIFO, st the topic
                the consumer subscribed to
    ack         ao acked queue offset, so start offset, c group, t topic, q queue id,
                pt pop time of the delivery acked, bn broker name

No I/O here: the service stores and replays what this module builds and parses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from pocketmq.protocol.message import Host, MessageConst, MessageExt

CK_TAG = "ck"
ACK_TAG = "ack"

_R = TypeVar("_R")


class UnreadableRecord(ValueError):
    """A revive-log body that is not a record of its tag (bad JSON, a missing or mistyped
    field, or per-message lists of different lengths)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PopCheckpoint:
    """Messages of one queue made invisible to a group by one pop (or change of invisible
    time) until ``pop_time + invisible_ms``."""

    group: str
    topic: str  # popped from: the subscribed topic or the group's POP retry topic
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_ms: int
    queue_offsets: tuple[int, ...]  # of the messages delivered, ascending
    broker_name: str
    next_begin: int  # the offset past the popped range (filtered messages included)
    reconsumes: tuple[int, ...]  # deliveries before this one, per message
    fifo: bool
    subscribed: str
    bit_map: int = 0
    revive_offset: int = 0

    def __post_init__(self) -> None:
        if len(self.reconsumes) != len(self.queue_offsets):
            raise UnreadableRecord(
                f"checkpoint of {len(self.queue_offsets)} messages has "
                f"{len(self.reconsumes)} reconsume times"
            )

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms

    def messages(self) -> Iterator[tuple[int, int]]:
        """(queue offset, reconsume times) of each message delivered."""
        return zip(self.queue_offsets, self.reconsumes, strict=True)

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "so": self.start_offset, "pt": self.pop_time, "it": self.invisible_ms,
                "bm": self.bit_map, "n": len(self.queue_offsets), "q": self.queue_id,
                "t": self.topic, "c": self.group, "ro": self.revive_offset,
                "d": [o - self.start_offset for o in self.queue_offsets],
                "bn": self.broker_name, "nb": self.next_begin, "rt": list(self.reconsumes),
                "o": self.fifo, "st": self.subscribed,
            }
        )  # fmt: skip

    @classmethod
    def from_json(cls, body: bytes) -> PopCheckpoint:
        """Our fields may be absent (a checkpoint RocketMQ wrote): no reconsumes, not FIFO,
        subscribed to the topic popped from.

        Raises:
            UnreadableRecord: not a checkpoint.
        """
        return _parse(body, "checkpoint", cls._from_dict)

    @classmethod
    def _from_dict(cls, ck: dict[str, Any]) -> PopCheckpoint:
        start, topic = int(ck["so"]), str(ck["t"])
        offsets = tuple(start + int(d) for d in ck["d"])
        return cls(
            group=str(ck["c"]), topic=topic, queue_id=int(ck["q"]), start_offset=start,
            pop_time=int(ck["pt"]), invisible_ms=int(ck["it"]), queue_offsets=offsets,
            broker_name=str(ck.get("bn") or ""), next_begin=int(ck["nb"]),
            reconsumes=tuple(int(r) for r in ck.get("rt") or [0] * len(offsets)),
            fifo=bool(ck.get("o")), subscribed=str(ck.get("st") or topic),
            bit_map=int(ck.get("bm") or 0), revive_offset=int(ck.get("ro") or 0),
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class AckRecord:
    """The delivery of one message made at ``pop_time`` is over: acked, dead-lettered,
    revived or replaced by a change of invisible time."""

    group: str
    topic: str  # popped from
    queue_id: int
    ack_offset: int
    start_offset: int
    pop_time: int
    broker_name: str

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "ao": self.ack_offset, "so": self.start_offset, "c": self.group, "t": self.topic,
                "q": self.queue_id, "pt": self.pop_time, "bn": self.broker_name,
            }
        )  # fmt: skip

    @classmethod
    def from_json(cls, body: bytes) -> AckRecord:
        """Raises:
        UnreadableRecord: not an ack record."""
        return _parse(body, "ack record", cls._from_dict)

    @classmethod
    def _from_dict(cls, ack: dict[str, Any]) -> AckRecord:
        offset = int(ack["ao"])
        return cls(
            group=str(ack["c"]), topic=str(ack["t"]), queue_id=int(ack["q"]), ack_offset=offset,
            start_offset=int(ack.get("so", offset)), pop_time=int(ack["pt"]),
            broker_name=str(ack.get("bn") or ""),
        )  # fmt: skip


def record_message(
    record: PopCheckpoint | AckRecord,
    revive_topic: str,
    born_timestamp_ms: int,
    store_host: Host,
) -> MessageExt:
    """The revive-log message of a record. A checkpoint waits for the store like any message
    (under SYNC_FLUSH, for the flush), since an in-flight message must survive whatever its
    message survives; an ack does not, as a lost ack only means a redelivery."""
    props = {MessageConst.TAGS: CK_TAG if isinstance(record, PopCheckpoint) else ACK_TAG}
    if isinstance(record, AckRecord):
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return MessageExt(
        topic=revive_topic,
        body=record.to_json(),
        queue_id=0,
        properties=props,
        born_timestamp=born_timestamp_ms,
        store_host=store_host,
    )


def _parse(body: bytes, what: str, build: Callable[[dict[str, Any]], _R]) -> _R:
    try:
        data = orjson.loads(body)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        return build(data)
    except UnreadableRecord:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableRecord(f"unreadable {what}: {exc!r}") from exc
