"""Dispatch: build consume-queue units and index entries from CommitLog records.

The ReputService tails the CommitLog from ``reput_from`` and hands each record to the
consume queues and the index. Appends feed it the requests they just built (no decoding on the
hot path); recovery and any lag decode the records from the log itself. Both paths meet in
``dispatch``, so a consume queue never points past the CommitLog and both are idempotent:
re-dispatching a record that is already in a queue or the index is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag
from pocketmq.protocol.names import SCHEDULE_TOPIC, TIMER_TOPIC
from pocketmq.protocol.native import select
from pocketmq.protocol.properties import tags_code
from pocketmq.protocol.record_codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, RecordInfo
from pocketmq.protocol.records import MIN_RECORD_SIZE, RecordWalk, Stop

if TYPE_CHECKING:
    from pocketmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int


def compute_tags_code(
    topic: str, properties: dict[str, str], store_timestamp: int, delay_levels_ms: tuple[int, ...]
) -> int:
    """The consume-queue tag field: the tag hash, or the delivery time for delayed and timer
    messages."""
    if topic == TIMER_TOPIC:
        try:
            return int(properties.get(MessageConst.TIMER_OUT_MS, ""))
        except ValueError:
            pass
    if topic == SCHEDULE_TOPIC:
        level_text = properties.get(MessageConst.DELAY_TIME_LEVEL)
        if level_text is not None:
            try:
                level = min(int(level_text), len(delay_levels_ms))
            except ValueError:
                level = 0
            if level > 0:
                return store_timestamp + delay_levels_ms[level - 1]
    return tags_code(properties.get(MessageConst.TAGS))


def dispatch_requests_py(
    msgs: Sequence[MessageExt],
    sizes: Sequence[int],
    sys_flags: Sequence[int],
    queue_offsets: Sequence[int],
    phy_offset: int,
    store_timestamp: int,
    delay_levels_ms: tuple[int, ...],
) -> list[DispatchRequest]:
    """The dispatch requests of a put's records, placed back to back from ``phy_offset``
    (CommitLog.put; native in ``pocketmq._speedups``, this the reference)."""
    reqs: list[DispatchRequest] = []
    schedule = (SCHEDULE_TOPIC, TIMER_TOPIC)  # their tag field holds a delivery time
    for msg, size, sys_flag, qo in zip(msgs, sizes, sys_flags, queue_offsets, strict=True):
        props = msg.properties
        topic = msg.topic
        reqs.append(
            DispatchRequest(
                topic, msg.queue_id, phy_offset, size,
                tags_code(props.get(MessageConst.TAGS)) if topic not in schedule
                else compute_tags_code(topic, props, store_timestamp, delay_levels_ms),
                store_timestamp, qo, props.get(MessageConst.KEYS),
                props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), sys_flag,
            )
        )  # fmt: skip
        phy_offset += size
    return reqs


dispatch_requests = select("dispatch_requests", dispatch_requests_py)


def request_from_record(info: RecordInfo, delay_levels_ms: tuple[int, ...]) -> DispatchRequest:
    return DispatchRequest(
        topic=info.topic,
        queue_id=info.queue_id,
        phy_offset=info.phy_offset,
        size=info.size,
        tags_code=compute_tags_code(
            info.topic, info.properties, info.store_timestamp, delay_levels_ms
        ),
        store_timestamp=info.store_timestamp,
        queue_offset=info.queue_offset,
        keys=info.keys,
        uniq_key=info.uniq_key,
        sys_flag=info.sys_flag,
    )


def goes_to_consume_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction messages stay out of consume queues."""
    t = SysFlag.transaction_value(sys_flag)
    return t == SysFlag.TRANSACTION_NOT_TYPE or t == SysFlag.TRANSACTION_COMMIT_TYPE


def next_queued(reqs: Sequence[DispatchRequest], i: int) -> int:
    """The position of the first of reqs[i:] that goes to a consume queue (or len(reqs))."""
    n = len(reqs)
    while i < n and not goes_to_consume_queue(reqs[i].sys_flag):
        i += 1
    return i


# Each dispatcher takes the requests of one put (or one stretch of the log), in log order, so
# that per-put work (the index inserts) is one call.
Dispatcher = Callable[[list[DispatchRequest]], None]
# How many records the pump hands the dispatchers at a time.
_PUMP_CHUNK = 1024


class ReputService:
    """Keeps consume queues and the index caught up with the CommitLog."""

    def __init__(
        self,
        commitlog: CommitLog,
        dispatchers: list[Dispatcher],
        delay_levels_ms: tuple[int, ...],
    ) -> None:
        self.commitlog = commitlog
        self.dispatchers = dispatchers
        self.delay_levels_ms = delay_levels_ms
        self.reput_from = 0
        # Store timestamp of the last dispatched record (feeds the checkpoint).
        self.last_store_timestamp = 0

    def dispatch(self, req: DispatchRequest) -> None:
        self.dispatch_all([req])

    def dispatch_all(self, reqs: list[DispatchRequest]) -> None:
        """Hand consecutive records to every dispatcher in turn."""
        if not reqs:
            return
        for d in self.dispatchers:
            d(reqs)
        self.last_store_timestamp = reqs[-1].store_timestamp

    def feed(self, reqs: list[DispatchRequest], end_offset: int) -> None:
        """Dispatch requests an append just built; falls back to reading the log on a gap."""
        if reqs and reqs[0].phy_offset == self.reput_from:
            self.dispatch_all(reqs)
            self.reput_from = end_offset
        else:
            self.pump()

    def pump(self, limit: int | None = None) -> int:
        """Dispatch records from reput_from to the end of the log (or to limit).

        Returns the number of records dispatched. A record that does not decode stops the pump
        (recovery has already cut such tails; this only guards against a concurrent writer).
        """
        log_ = self.commitlog
        end = log_.max_offset() if limit is None else min(limit, log_.max_offset())
        count = 0
        offset = max(self.reput_from, log_.min_offset())
        while offset < end:
            mf = log_.mfq.find(offset)
            if mf is None:
                break
            file_from = mf.file_from_offset
            walk = RecordWalk(
                mf.mm,
                offset - file_from,
                min(mf.wrote_position, end - file_from),
                end=mf.wrote_position,
            )
            chunk: list[DispatchRequest] = []
            for info in walk.records():
                chunk.append(request_from_record(info, self.delay_levels_ms))
                if len(chunk) >= _PUMP_CHUNK:
                    self.dispatch_all(chunk)
                    count += len(chunk)
                    chunk = []
            self.dispatch_all(chunk)
            count += len(chunk)
            if walk.stop is Stop.BLANK:
                offset = mf.file_end_offset
            elif walk.stop is Stop.LIMIT:
                offset = file_from + walk.pos
                if walk.pos >= mf.file_size:
                    offset = mf.file_end_offset
            else:
                if not _torn_by_end(walk):
                    log.error("reput stopped at %d: %s", file_from + walk.pos, walk.detail)
                self.reput_from = file_from + walk.pos
                return count
            self.reput_from = offset
        return count


def _torn_by_end(walk: RecordWalk) -> bool:
    """Whether the walk stopped at a record that the write position cuts: a slave appends
    what its master sends, which may end inside a record; the rest follows."""
    if walk.stop is Stop.SHORT:
        return True
    return (
        walk.stop is Stop.DAMAGED
        and walk.magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
        and walk.size >= MIN_RECORD_SIZE
        and walk.pos + walk.size > walk.end
    )
