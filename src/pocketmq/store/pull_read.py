"""The pull read path of the message store (DefaultMessageStore.getMessage): a queue's units
from an offset on, filtered by tag hash code then by the record itself, their CommitLog
records copied into one body (``store.pull_scan``), and the pull's status, next offset and
whether to suggest the slave. Reads only; runs on the caller's thread. No I/O beyond the mapped
files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.store.filter import MessageFilter, filter_parts
from pocketmq.store.pull_scan import pull_scan
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

    codes, record_filter = filter_parts(message_filter)
    commitlog = store.commitlog
    body, units, next_begin, last_phy, removing = pull_scan(
        cq.mfq.files, cq.mfq.file_size, offset,
        commitlog.mfq.files, commitlog.mfq.file_size, commitlog.min_offset(),
        codes, record_filter,
        min(max_msg_nums, store.config.max_transfer_count_on_message_in_memory),
        store.config.max_transfer_bytes_on_message_in_memory,
        max(store.config.max_filter_message_count, max_msg_nums * 20),
    )  # fmt: skip
    if units:
        status = GetStatus.FOUND
    elif removing:
        status = GetStatus.MESSAGE_WAS_REMOVING
    else:
        status = GetStatus.NO_MATCHED_MESSAGE
    behind = commitlog.max_offset() - last_phy
    return GetResult(
        status, next_begin, min_offset, max_offset, body, units,
        suggest_pulling_from_slave=behind > store.memory_for_reads_bytes,
    )  # fmt: skip
