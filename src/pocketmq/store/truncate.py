"""Cutting the store back to a CommitLog offset: what a broker does before it follows a new
master whose log does not hold its tail (failover, RocketMQ 5's truncateInvalidMsg).

``truncate_store(store, phy_offset)`` drops every record at or after ``phy_offset`` from the
CommitLog, the consume queues, the index and the per-queue offset counters, so that the store
then equals one that never had those records: the next append (or replicated byte) lands at
``phy_offset`` with the queue offsets those records had. The cut is made durable before it
returns (the zeroed tails are synced), so a later crash cannot bring the dropped records back.

Not for the hot path: it walks the segment holding the cut to check that ``phy_offset`` is a
record boundary, and must run while nothing appends (the broker has stopped taking writes).
Puts still waiting for a flush past the cut are answered as not flushed.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from typing import TYPE_CHECKING

from pocketmq.errors import StoreError
from pocketmq.protocol.records import RecordWalk, Stop
from pocketmq.store.mapped_file_queue import MappedFileQueue

if TYPE_CHECKING:
    from pocketmq.store.commitlog import CommitLog
    from pocketmq.store.consume_queue import ConsumeQueue
    from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)


def check_boundary(commitlog: CommitLog, phy_offset: int) -> int:
    """Check that ``phy_offset`` is a record boundary of the log (its end included) and return
    the store timestamp of the last record before it (0 if there is none).

    Raises:
        StoreError: ``phy_offset`` is outside the log or falls inside a record.
    """
    lo, hi = commitlog.min_offset(), commitlog.max_offset()
    if not lo <= phy_offset <= hi:
        raise StoreError(f"cannot truncate at {phy_offset}: the commitlog holds [{lo}, {hi})")
    if phy_offset == lo:
        return 0
    # The segment holding the byte before the cut: the cut is its end, or inside it.
    mf = commitlog.mfq.find(phy_offset - 1)
    if mf is None:
        raise StoreError(f"cannot truncate at {phy_offset}: its segment is gone")
    limit = phy_offset - mf.file_from_offset
    walk = RecordWalk(mf.mm, 0, limit, end=mf.wrote_position, base_offset=mf.file_from_offset)
    store_ts = 0
    for info in walk.records(check_crc=False):
        store_ts = info.store_timestamp
    at_end = walk.stop is Stop.BLANK and limit == mf.file_size
    if not at_end and (walk.pos != limit or walk.stop not in (Stop.LIMIT, Stop.BLANK)):
        why = walk.stop.value if walk.stop is not None else walk.detail
        raise StoreError(
            f"cannot truncate at {phy_offset}: not a record boundary (the walk of segment "
            f"{mf.path.name} stopped at {mf.file_from_offset + walk.pos}: {why})"
        )
    return store_ts


def _sync_tail(mfq: MappedFileQueue) -> None:
    """fdatasync the last file, whose zeroed tail no position counter says is dirty."""
    last = mfq.last()
    if last is not None:
        last.sync()


def _drop_queue(store: MessageStore, cq: ConsumeQueue) -> None:
    queues = store.consume_queue_table.get(cq.topic, {})
    queues.pop(cq.queue_id, None)
    if not queues:
        store.consume_queue_table.pop(cq.topic, None)
    cq.destroy()
    shutil.rmtree(cq.mfq.directory, ignore_errors=True)
    with contextlib.suppress(OSError):  # other queues of the topic still live there
        cq.mfq.directory.parent.rmdir()


def truncate_store(store: MessageStore, phy_offset: int) -> None:
    """Drop every record at or after ``phy_offset`` (see the module docstring).

    Raises:
        StoreError: ``phy_offset`` is outside the CommitLog or not a record boundary; nothing
            is changed then.
    """
    commitlog = store.commitlog
    with commitlog.put_lock:
        last_ts = check_boundary(commitlog, phy_offset)
        if phy_offset == commitlog.max_offset():
            return
        log.warning(
            "truncating the store at commitlog offset %d (%d bytes dropped)",
            phy_offset,
            commitlog.max_offset() - phy_offset,
        )
        # Dispatch first catches up, so every dropped record's units are there to be undone
        # and no record past the cut is dispatched afterwards.
        store.reput.pump()
        commitlog.mfq.truncate_dirty(phy_offset)
        _sync_tail(commitlog.mfq)
        if store.flush_service is not None:
            store.flush_service.abandon_beyond(phy_offset)
        store.reput.reput_from = phy_offset
        table = commitlog.topic_queue_table
        for cq in store.all_queues():
            cq.truncate_dirty(phy_offset)
            key = (cq.topic, cq.queue_id)
            if cq.max_offset_in_queue() == 0:
                # Every unit of the queue was dropped: a store without them has no such queue.
                _drop_queue(store, cq)
                table.pop(key, None)
                continue
            _sync_tail(cq.mfq)
            table[key] = cq.max_offset_in_queue()
        if store.config.message_index_enable:
            store.index.truncate(phy_offset)
            store.index.flush()
        checkpoint = store.checkpoint
        if checkpoint is not None and last_ts:
            # Abnormal recovery starts from the segment older than these: never past the cut.
            checkpoint.physic_msg_timestamp = min(checkpoint.physic_msg_timestamp, last_ts)
            checkpoint.logics_msg_timestamp = min(checkpoint.logics_msg_timestamp, last_ts)
            checkpoint.index_msg_timestamp = min(checkpoint.index_msg_timestamp, last_ts)
            checkpoint.flush()
