"""A single message's put in one call: its CommitLog record and, when it takes it without
I/O, its consume-queue unit (``put_one``, native in ``pocketmq._speedups``, this module's
``put_one_py`` the reference). Most puts are single sends, and this is one call where the
general put makes several.

``MessageStore.append`` calls it, under the CommitLog's ``put_lock``, for a segment that
``CommitLog.one_put_segment`` gave and while the reput service is at the segment's write
position (nothing waits to be dispatched before the record). It writes the record when it
ends within ``put_record``'s limit (``one_put_limit``), else nothing; then the unit, when the
record goes to a consume queue and ``ConsumeQueue.put_in_place`` takes it. What it leaves (a
new queue, a reservation) and the index entries the caller dispatches the general way; the
caller also moves the reput service past the record and wakes whoever waits. The index stays
out: its inserts are where the crash tests stop a put half way (tests/crash/test_sigkill.py).
"""

from __future__ import annotations

import mmap
from typing import Protocol

from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.native import select
from pocketmq.store.commitlog import PWRITE_MIN, PutArgs, put_record
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.dispatch import DispatchRequest, goes_to_consume_queue
from pocketmq.store.layout import END_FILE_MIN_BLANK_LENGTH


class Segment(Protocol):
    """What put_one reads and moves of a CommitLog segment (store.mapped_file.MappedFile)."""

    mm: mmap.mmap
    file_from_offset: int
    file_size: int
    wrote_position: int
    reserved: int
    store_timestamp: int


def one_put_limit(mf: Segment) -> int:
    """Where a single put's record must end to be copied in the short way: within the
    reservation, below PWRITE_MIN, and leaving the segment room for its closing blank."""
    pos = mf.wrote_position
    return min(mf.reserved, mf.file_size - END_FILE_MIN_BLANK_LENGTH, pos + PWRITE_MIN - 1)


def put_one_py(
    msg: MessageExt, mf: Segment, put_args: PutArgs, cq: ConsumeQueue | None, store_ts: int
) -> tuple[DispatchRequest, int] | None:
    """Put ``msg`` at the write position of ``mf`` (the module docstring); ``cq`` is the
    message's consume queue, None when it has none yet.

    Returns:
        None when the record was not written (nothing was); else its request and the queue
        offset past its unit (0 when it goes to no consume queue, -1 when the unit is left
        to the caller).

    Raises:
        RecordEncodeError, ValueError, OverflowError: as ``encode_records`` (nothing written).
    """
    pos = mf.wrote_position
    host, hosts, max_body, max_record, table, levels = put_args
    req = put_record(
        mf.mm, pos, one_put_limit(mf), msg, host, hosts, max_body, max_record,
        mf.file_from_offset + pos, store_ts, table, levels,
    )  # fmt: skip
    if req is None:
        return None
    mf.wrote_position = pos + req.size
    mf.store_timestamp = store_ts
    reqs = [req]
    queue_end = 0
    if goes_to_consume_queue(req.sys_flag):
        queue_end = cq.put_in_place(reqs, 0)[1] if cq is not None and cq.mfq.files else -1
    return req, queue_end


put_one = select("put_one", put_one_py)
