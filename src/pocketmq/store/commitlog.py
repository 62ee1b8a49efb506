"""CommitLog: every topic's records, appended to one log of mapped segments, and its recovery.

Record layout: see pocketmq.protocol.record_codec; recovery walks segments with
pocketmq.protocol.records. A put encodes its records in one pass before taking ``put_lock``
(``encode_records``, native when the extension is active), then, under the lock on the
caller's thread, gives them their offsets and store time (``place_records``) and writes them,
the first record's TOTALSIZE last: a process killed meanwhile leaves a zero size where the put
would start, which recovery reads as the end of the log, so a put of several records leaves all
of them or none (a transaction's commit and its op record rely on it), short of a torn page
after a power cut. A small put is copied into the mapping (``place_records`` orders the size
last); a large one is placed in a scratch buffer and written with two pwrites, every byte but
the size, then the size (one would not do: the kernel cuts a write between pages when the
process is killed). See mapped_file.py for why the two ways.
"""

from __future__ import annotations

import errno
import logging
import mmap
import struct
import threading
from collections.abc import Callable

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import StoreWriteError
from pocketmq.protocol.message import Host, MessageExt, SysFlag, host_to_bytes
from pocketmq.protocol.native import select
from pocketmq.protocol.record_codec import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    POS_MAGIC,
    PropertiesTooLong,
    RecordEncodeError,
    RecordError,
    RecordInfo,
    decode_record_info,
    encode_records,
    peek_record_size,
    place_records,
)
from pocketmq.protocol.records import RecordWalk, Stop
from pocketmq.store.config import StoreConfig
from pocketmq.store.dispatch import DispatchRequest, dispatch_requests
from pocketmq.store.layout import BLANK_MAGIC, END_FILE_MIN_BLANK_LENGTH, commitlog_dir
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.mapped_file_queue import MappedFileQueue
from pocketmq.store.reserve import COMMITLOG_RESERVE
from pocketmq.store.results import PutResult, PutStatus

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_BLANK = struct.Struct(">iI")
# Receives each valid record met by recovery (abnormal recovery re-dispatches them).
DispatchSink = Callable[[RecordInfo], None]
# Extra bytes beside the largest body in which a record always has a non-zero byte.
_RECORD_OVERHEAD_BOUND = 64 * 1024
# Transaction types that take a queue offset (prepared and rolled-back records take none).
_IN_QUEUE = (SysFlag.TRANSACTION_NOT_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE)
# Puts at least this large are written with pwrite (a batch of some 50 messages of 1 KiB): their
# two system calls cost less than the zeroing of the pages a copy would fault in.
PWRITE_MIN = 64 * 1024
# The scratch buffer a pwritten put is placed in is kept for the next ones up to this size (a
# producer's largest batch); a larger put (large single sends coalesced) gets its own, freed
# after it.
SCRATCH_KEPT = 4 * 1024 * 1024


# put_record's arguments beside the message, its place and time: the store host's bytes, the
# born hosts' cache, the largest body, the largest record, the queue-offset table, the delay
# levels (CommitLog.put_args).
PutArgs = tuple[bytes, dict[Host, bytes], int, int, dict[tuple[str, int], int], tuple[int, ...]]


def take_queue_offsets(
    table: dict[tuple[str, int], int], first: MessageExt, count: int
) -> list[int]:
    """The offsets of a run of ``count`` messages for ``first``'s queue, taken from ``table``
    (a CommitLog's ``topic_queue_table``, under its ``put_lock``): consecutive when its first
    message's transaction type goes to a consume queue, else 0 each."""
    if (first.sys_flag & SysFlag.TRANSACTION_ROLLBACK_TYPE) not in _IN_QUEUE:
        return [0] * count
    key = (first.topic, first.queue_id)
    qo = table.get(key, 0)
    table[key] = qo + count
    return [qo] if count == 1 else list(range(qo, qo + count))


def put_record_py(
    mm: mmap.mmap | bytearray, pos: int, limit: int, msg: MessageExt, store_host: bytes,
    born_hosts: dict[Host, bytes], max_body: int, max_record: int, phy: int, store_ts: int,
    queue_table: dict[tuple[str, int], int], delay_levels_ms: tuple[int, ...],
) -> DispatchRequest | None:  # fmt: skip
    """One message's record encoded (``encode_records``), given the next offset of its queue
    (``take_queue_offsets``) and placed at ``pos`` of ``mm`` (``place_records``) when it ends
    at ``limit`` or before; its dispatch request. None when it does not fit: nothing written,
    nothing taken. A single put's record (store/put_one.py) in one call (native in
    ``pocketmq._speedups``, this the reference).

    Raises:
        RecordEncodeError, ValueError, OverflowError: as ``encode_records``.
    """
    data, sizes, sys_flags = encode_records([msg], store_host, born_hosts, max_body, max_record)
    if pos + len(data) > limit:
        return None
    queue_offsets = take_queue_offsets(queue_table, msg, 1)
    place_records(mm, pos, data, phy, store_ts, queue_offsets)
    (req,) = dispatch_requests(
        [msg], sizes, sys_flags, queue_offsets, phy, store_ts, delay_levels_ms
    )
    return req


put_record = select("put_record", put_record_py)


class CommitLog:
    def __init__(self, config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock  # the records' store timestamps
        self.mfq = MappedFileQueue(
            commitlog_dir(config.root),
            config.mapped_file_size_commit_log,
            min_zero_run=config.max_message_size + _RECORD_OVERHEAD_BOUND,
            policy=COMMITLOG_RESERVE,
        )
        self.put_lock = threading.Lock()
        # Next queue offset per (topic, queue id); rebuilt from the consume queues on start.
        # Changed in place only: put_args holds this dict (and _born_hosts).
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.store_host = config.store_host_tuple
        self._store_host_bytes = host_to_bytes(self.store_host)
        self._born_hosts: dict[Host, bytes] = {}  # encode_records' cache
        # The longest record: a segment less its closing blank.
        self._max_record = config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        self.delay_levels_ms = config.delay_levels_ms
        # What put_record takes beside the message, its place and time (put_one.py).
        self.put_args: PutArgs = (
            self._store_host_bytes, self._born_hosts, config.max_message_size,
            self._max_record, self.topic_queue_table, self.delay_levels_ms,
        )  # fmt: skip
        # Set by the first failed write: later puts fail fast until the store is reopened.
        self.write_error: StoreWriteError | None = None
        # Fault hook (tests): the next append fails mid-record, as a failed write would.
        self._fail_next_write = False
        # Where a large put's records get their offsets before they are written.
        self._scratch = bytearray()

    # --- offsets --------------------------------------------------------------------

    def min_offset(self) -> int:
        return self.mfq.min_offset()

    def max_offset(self) -> int:
        return self.mfq.max_offset()

    # --- append ---------------------------------------------------------------------

    def put(self, msgs: list[MessageExt]) -> tuple[PutResult, list[DispatchRequest]]:
        """Append one message or several, contiguously and all or nothing; each takes the next
        offset of its own queue (a batch is one queue; a transaction's commit and op are two).

        Returns the result and the dispatch requests for the records written.
        """
        if self.write_error is not None:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, detail=str(self.write_error)), []
        if not msgs:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, detail="empty batch"), []
        segment = self.config.mapped_file_size_commit_log
        try:
            data, sizes, sys_flags = self._encode(msgs)
        except PropertiesTooLong as exc:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, detail=str(exc)), []
        except RecordEncodeError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, detail=str(exc)), []
        total = len(data)
        if total + END_FILE_MIN_BLANK_LENGTH > segment:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, detail="batch larger than a segment"), []

        with self.put_lock:
            try:
                mf = self._writable_file(total)
                # Blocks are reserved before a byte is written (see mapped_file.py).
                if mf.wrote_position + total > mf.reserved:
                    mf.reserve(mf.wrote_position + total)
            except OSError as exc:
                detail = f"cannot reserve commitlog space: {exc.strerror or exc}"
                log.error(detail)
                return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, detail=detail), []
            store_ts = self.clock.now_ms()
            pos = mf.wrote_position
            phy = mf.file_from_offset + pos
            if self._fail_next_write:
                self._fail_next_write = False
                # A write torn before the first size went in: the bytes, never the size.
                mf.mm[pos + 4 : pos + total] = memoryview(data)[4:]
                error = self.fail_writes(
                    OSError(errno.EIO, "Input/output error (fault hook)"),
                    f"commitlog write at {phy} failed",
                )
                log.error("%s", error)
                return PutResult(PutStatus.UNKNOWN_ERROR, detail=str(error)), []
            queue_offsets = self._take_queue_offsets(msgs)
            try:
                self._write(mf, pos, data, phy, store_ts, queue_offsets)
            except OSError as exc:
                # The queue offsets taken come back from the consume queues when the store,
                # failed, is reopened.
                error = self.fail_writes(exc, f"commitlog write at {phy} failed")
                log.error("%s", error)
                return PutResult(PutStatus.UNKNOWN_ERROR, detail=str(error)), []
            mf.wrote_position = pos + total
            mf.store_timestamp = store_ts
        reqs = dispatch_requests(
            msgs, sizes, sys_flags, queue_offsets, phy, store_ts, self.delay_levels_ms
        )
        offsets = [r.phy_offset for r in reqs]
        return (
            PutResult(
                PutStatus.PUT_OK,
                phy_offsets=offsets,
                queue_offset=queue_offsets[0],
                wrote_bytes=total,
                store_timestamp=store_ts,
                store_host=self.store_host,
            ),
            reqs,
        )

    def one_put_segment(self) -> MappedFile | None:
        """The last segment when a single put may take the short way (store/put_one.py):
        nothing but the copy of its record into the mapping, or, when it does not fit there,
        nothing (no new segment, reservation, pwrite, failed write or fault hook on its way).
        None: ``put`` takes every put now. Called under ``put_lock``."""
        files = self.mfq.files
        if (
            not files
            or not self.mfq.prefaulting
            or self.write_error is not None
            or self._fail_next_write
        ):
            return None
        return files[-1]

    def _encode(self, msgs: list[MessageExt]) -> tuple[bytes, list[int], list[int]]:
        """``encode_records`` of a put: bodies up to max_message_size, records that fit a
        segment beside its closing blank.

        Raises:
            RecordEncodeError, ValueError, OverflowError: as ``encode_records``.
        """
        return encode_records(
            msgs, self._store_host_bytes, self._born_hosts, self.config.max_message_size,
            self._max_record,
        )  # fmt: skip

    def _write(
        self,
        mf: MappedFile,
        pos: int,
        data: bytes,
        phy: int,
        store_ts: int,
        queue_offsets: list[int],
    ) -> None:
        """Write a put's records at ``pos`` of ``mf``, the first size last (module docstring).

        Raises:
            OSError: a pwrite failed; bytes past ``pos`` may have been written, never the size.
        """
        total = len(data)
        if not self._pwrites(mf, pos, total):
            place_records(mf.mm, pos, data, phy, store_ts, queue_offsets)
            return
        scratch = self._scratch
        if len(scratch) < total:
            scratch = bytearray(total)
            if total <= SCRATCH_KEPT:
                self._scratch = scratch
        place_records(scratch, 0, data, phy, store_ts, queue_offsets)
        with memoryview(scratch)[:total] as records:
            mf.write(pos + 4, records[4:])
            mf.write(pos, records[:4])

    def _pwrites(self, mf: MappedFile, pos: int, size: int) -> bool:
        """Whether an append of ``size`` bytes at ``pos`` of ``mf`` is written with pwrite
        rather than copied into the mapping, telling the prefault thread which it is."""
        if size >= PWRITE_MIN:
            self.mfq.prefaulting = False
            return True
        if not self.mfq.prefaulting:
            # The pages ahead were left unfaulted for pwrites: wake the prefault thread now.
            self.mfq.prefaulting = True
            mf.wake_at = pos
        return False

    def _take_queue_offsets(self, msgs: list[MessageExt]) -> list[int]:
        """Each message's queue offset, taken from ``topic_queue_table`` (under ``put_lock``),
        a run of messages for one queue at a time (``take_queue_offsets``)."""
        if len(msgs) == 1:  # a single send: most puts
            return take_queue_offsets(self.topic_queue_table, msgs[0], 1)
        offsets: list[int] = []
        i = 0
        while i < len(msgs):
            first = msgs[i]
            j = i + 1
            while (
                j < len(msgs)
                and msgs[j].queue_id == first.queue_id
                and msgs[j].topic == first.topic
            ):
                j += 1
            offsets += take_queue_offsets(self.topic_queue_table, first, j - i)
            i = j
        return offsets

    def _writable_file(self, need: int) -> MappedFile:
        """The segment that can take ``need`` bytes, closing the current one with a blank
        record if they do not fit (the blank always fits: appends keep 8 bytes free)."""
        mf = self.mfq.last_for_write()
        if need + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
            blank = mf.free_space
            if mf.wrote_position + _BLANK.size > mf.reserved:
                mf.reserve(mf.wrote_position + _BLANK.size)
            _BLANK.pack_into(mf.mm, mf.wrote_position, blank, BLANK_MAGIC)
            mf.wrote_position = mf.file_size
            mf = self.mfq.last_for_write()
        return mf

    def append_data(self, phy_offset: int, data: memoryview) -> None:
        """Append bytes replicated from a master at ``phy_offset`` (RocketMQ's appendData): a
        slave's log is a byte-identical prefix of its master's, blank records included, so
        segments end where the master's do. A log with nothing written yet starts at the
        segment holding ``phy_offset``, which must be that segment's first byte.

        Raises:
            StoreWriteError: the offset is not this log's end, the bytes run past the end of
                a segment, or a segment cannot be created or reserved (the log is unchanged).
        """
        if self.write_error is not None:
            raise self.write_error
        with self.put_lock:
            end = self.mfq.max_offset()
            if end == 0 and phy_offset != 0:
                if phy_offset % self.mfq.file_size:
                    raise StoreWriteError(
                        f"an empty commitlog cannot start at {phy_offset}: not a segment start"
                    )
                self.mfq.start_at(phy_offset)
            elif phy_offset != end:
                raise StoreWriteError(
                    f"replicated bytes at {phy_offset}, but the log ends at {end}"
                )
            try:
                mf = self.mfq.last_for_write(phy_offset)
                pos = mf.wrote_position
                if len(data) > mf.file_size - pos:
                    raise StoreWriteError(
                        f"{len(data)} replicated bytes at {phy_offset} run past the segment end"
                    )
                if pos + len(data) > mf.reserved:
                    mf.reserve(pos + len(data))
                if self._pwrites(mf, pos, len(data)):
                    mf.write(pos, data)
                else:
                    mf.mm[pos : pos + len(data)] = data
            except OSError as exc:
                raise StoreWriteError(f"cannot store replicated bytes: {exc}") from exc
            mf.wrote_position = pos + len(data)

    # --- reads ----------------------------------------------------------------------

    def read(self, phy_offset: int, size: int) -> bytes | None:
        """The bytes of a record, or None when its segment is gone or the range is invalid."""
        mf = self.mfq.find(phy_offset)
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        if size <= 0 or pos + size > mf.wrote_position:
            return None
        try:
            return mf.read(pos, size)
        except ValueError:  # segment deleted by retention meanwhile
            return None

    def read_record(self, phy_offset: int) -> bytes | None:
        """The record starting at phy_offset, reading its size from the log."""
        mf = self.mfq.find(phy_offset)
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        try:
            size, magic = peek_record_size(mf.mm, pos)
        except ValueError:
            return None
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            return None
        return self.read(phy_offset, size)

    def store_timestamp_at(self, phy_offset: int) -> int:
        """STORETIMESTAMP of the record at phy_offset, or -1."""
        raw = self.read_record(phy_offset)
        if raw is None:
            return -1
        try:
            return decode_record_info(raw, 0, len(raw), check_crc=False).store_timestamp
        except RecordError:
            return -1

    # --- recovery -------------------------------------------------------------------

    def load(self) -> None:
        self.mfq.load()

    def _scan_file(
        self, mf: MappedFile, check_crc: bool, on_record: DispatchSink | None
    ) -> tuple[int, int, str]:
        """Walk a segment's records: (end position, records, why it stopped)."""
        size_limit = mf.file_size
        # Nothing past the data's end was written, and reading it could fault (data_end).
        data_end = mf.data_end(0)
        walk = RecordWalk(mf.mm, 0, size_limit, end=data_end, base_offset=mf.file_from_offset)
        records = 0
        for info in walk.records(check_crc):
            if on_record is not None:
                on_record(info)
            records += 1
        stop = walk.stop
        if stop is Stop.BLANK:
            if walk.size != size_limit - walk.pos:
                return (
                    walk.pos,
                    records,
                    f"blank record of size {walk.size} does not close the segment",
                )
            return size_limit, records, "blank"
        if stop is Stop.SHORT and data_end < size_limit:
            return walk.pos, records, Stop.END_OF_DATA.value
        if stop is Stop.LIMIT or stop is Stop.SHORT:
            return walk.pos, records, "end of segment without a blank record"
        return walk.pos, records, walk.detail

    def recover(
        self, start_index: int, check_crc: bool, on_record: DispatchSink | None = None
    ) -> int:
        """Validate records from segment start_index on; cut the log where they stop.

        Returns the offset the log was cut at (its new end).

        Shared by normal recovery (start at the third-last segment) and abnormal recovery
        (start at the segment chosen from the checkpoint, dispatching every record).
        """
        files = self.mfq.files
        if not files:
            return 0
        process_offset = files[start_index].file_from_offset
        total = 0
        reason = "end of data"
        for mf in files[start_index:]:
            end, records, reason = self._scan_file(mf, check_crc, on_record)
            total += records
            process_offset = mf.file_from_offset + end
            if reason != "blank":
                break
        if reason == "blank":
            reason = "end of data"
        log.info(
            "commitlog recovered to %d (%d records checked): %s", process_offset, total, reason
        )
        # Segments fully written before the cut stay full; the last one continues at the cut.
        self.mfq.truncate_dirty(process_offset)
        self.mfq.flushed_where = process_offset
        return process_offset

    def recover_normally(self) -> int:
        start = max(0, len(self.mfq.files) - 3)
        return self.recover(start, self.config.check_crc_on_recover)

    def abnormal_start_index(self, min_timestamp: int) -> int:
        """The last segment whose first record is older than the checkpoint (or the first)."""
        files = self.mfq.files
        for idx in range(len(files) - 1, -1, -1):
            mm = files[idx].mm
            data_end = files[idx].data_end(0)  # a segment prepared ahead may hold nothing
            if data_end < POS_MAGIC + 4:
                continue
            if _SIZE.unpack_from(mm, POS_MAGIC)[0] & 0xFFFFFFFF not in (
                MESSAGE_MAGIC_CODE,
                MESSAGE_MAGIC_CODE_V2,
            ):
                continue
            try:
                info = decode_record_info(mm, 0, data_end, check_crc=False)
            except RecordError:
                continue
            if info.store_timestamp != 0 and info.store_timestamp <= min_timestamp:
                return idx
        return 0

    def recover_abnormally(self, min_timestamp: int, on_record: DispatchSink) -> int:
        start = self.abnormal_start_index(min_timestamp)
        return self.recover(start, self.config.check_crc_on_recover, on_record)

    # --- lifecycle ------------------------------------------------------------------

    def fail_writes(self, cause: Exception, what: str) -> StoreWriteError:
        """Refuse every later put with the StoreWriteError returned: after a failed write or
        flush, bytes already handed to the page cache may be lost, so nothing after the last
        good flush can be promised durable. The first failure is the one kept; the store must
        be reopened."""
        if self.write_error is None:
            error = StoreWriteError(f"{what}: {cause}")
            error.__cause__ = cause
            self.write_error = error
        return self.write_error

    def flush(self) -> int:
        return self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()
