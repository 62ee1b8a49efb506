"""Lookups of the message store that combine its parts: records by key (the index, then the
CommitLog to resolve hash collisions) and queue offsets by store time (a bisection over a
consume queue). Reads only; runs on the caller's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol.properties import KEY_SEPARATOR
from pocketmq.protocol.record_codec import RecordError, decode_record_info
from pocketmq.store.results import QueryResult

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore


def query_by_key(
    store: MessageStore, topic: str, key: str, max_num: int, begin_timestamp: int,
    end_timestamp: int,
) -> QueryResult:  # fmt: skip
    """Records of topic whose KEYS or UNIQ_KEY contain key, stored in the time range.

    Index hash collisions are resolved here by comparing keys.
    """
    if not store.config.message_index_enable:
        return QueryResult([], 0, 0)
    limit = max_num * 2 + 8
    while True:
        offsets, ts, phy = store.index.query(topic, key, limit, begin_timestamp, end_timestamp)
        messages: list[bytes] = []
        seen: set[int] = set()
        for off in offsets:
            if off in seen or len(messages) >= max_num:
                continue
            seen.add(off)
            raw = store.commitlog.read_record(off)
            if raw is None:
                continue
            try:
                info = decode_record_info(raw, 0, len(raw), check_crc=False)
            except RecordError:
                continue
            keys = (info.keys or "").split(KEY_SEPARATOR)
            if info.topic == topic and (key == info.uniq_key or key in keys):
                messages.append(raw)
        # Entries of other keys with the same hash can fill the answer: ask the index for
        # more until enough records match or it has nothing more to give.
        if len(messages) >= max_num or len(offsets) < limit:
            return QueryResult(messages, ts, phy)
        limit *= 4


def offset_by_time(store: MessageStore, topic: str, queue_id: int, timestamp: int) -> int:
    """The first queue offset stored at or after timestamp; the max offset if none is
    (RocketMQ's getOffsetInQueueByTime with the default lower boundary)."""
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None:
        return 0
    lo, hi = cq.min_offset_in_queue(), cq.max_offset_in_queue()
    while lo < hi:
        mid = (lo + hi) // 2
        ts = store.get_message_store_timestamp(topic, queue_id, mid)
        if ts < 0 or ts < timestamp:
            lo = mid + 1
        else:
            hi = mid
    return lo
