"""The pull read path of the message store (DefaultMessageStore.getMessage): a queue's units
from an offset on, filtered by tag hash code then by the record itself, their CommitLog
records as slices, and the pull's status, next offset and whether to suggest the slave.
Reads only; runs on the caller's thread. No I/O beyond the mapped files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.store.consume_queue import BLANK_UNIT_SIZE
from pocketmq.store.filter import MessageFilter
from pocketmq.store.results import GetResult, GetStatus

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore


def get_message(
    store: MessageStore, topic: str, queue_id: int, offset: int, max_msg_nums: int,
    message_filter: MessageFilter | None,
) -> GetResult:  # fmt: skip
    """Up to max_msg_nums records of a queue from offset on."""
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None:
        return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    min_offset = cq.min_offset_in_queue()
    max_offset = cq.max_offset_in_queue()
    if max_offset == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if offset < min_offset:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if offset == max_offset:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
    if offset > max_offset:
        nxt = min_offset if min_offset == 0 else max_offset
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, nxt, min_offset, max_offset)

    max_bytes = store.config.max_transfer_bytes_on_message_in_memory
    max_count = min(max_msg_nums, store.config.max_transfer_count_on_message_in_memory)
    max_scan = max(store.config.max_filter_message_count, max_msg_nums * 20)
    result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
    commitlog_min = store.commitlog.min_offset()
    last_phy = 0
    total = 0
    scanned = 0
    removing = False
    for qo, phy, size, tags in cq.iter_units(offset):
        if scanned >= max_scan:
            break
        if result.messages and total + size > max_bytes:
            result.next_begin_offset = qo
            break
        scanned += 1
        result.next_begin_offset = qo + 1
        last_phy = phy
        if size == BLANK_UNIT_SIZE or phy < commitlog_min:
            removing = True
            continue
        if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags):
            continue
        raw = store.commitlog.read(phy, size)
        if raw is None:
            removing = True
            continue
        if message_filter is not None and not message_filter.is_matched_by_commit_log(raw):
            continue
        result.messages.append(raw)
        result.queue_offsets.append(qo)
        total += size
        if len(result.messages) >= max_count:
            break
    behind = store.commitlog.max_offset() - last_phy
    result.suggest_pulling_from_slave = behind > store.memory_for_reads_bytes
    if result.messages:
        result.status = GetStatus.FOUND
    elif removing:
        result.status = GetStatus.MESSAGE_WAS_REMOVING
    return result
