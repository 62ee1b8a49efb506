"""MessageStore: the storage engine's facade (RocketMQ's DefaultMessageStore).

A synchronous core used from one event loop: appends and reads are memory copies into
mappings. Its async edge is ``put_message``/``put_messages``, which under SYNC_FLUSH await the
group commit of the flush thread. Disk waits (fdatasync, deleting files) run on the store's
own threads.

    open():  lock the directory, load segments, recover (normal, or abnormal when the abort
             marker was left behind), rebuild consume queues and the index from the CommitLog
             where they lag or are missing, start the flush and housekeeping threads.
    close(): stop the threads, flush everything, write the checkpoint, remove the abort marker.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import StoreError
from pocketmq.pending import Pending, outcome_of, pending_of
from pocketmq.protocol.message import MessageConst, MessageExt, decode_offset_msg_id
from pocketmq.protocol.record_codec import (
    RecordEncodeError,
    RecordError,
    RecordInfo,
    decode_message,
)
from pocketmq.store import pull_read, query, retention
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import BrokerRole, FlushDiskType, StoreConfig
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue
from pocketmq.store.dispatch import (
    Dispatcher,
    DispatchRequest,
    ReputService,
    goes_to_consume_queue,
    next_queued,
    request_from_record,
)
from pocketmq.store.filter import MessageFilter
from pocketmq.store.flush import FlushCommitLogService, HousekeepingService
from pocketmq.store.folios import HUGE_FOLIO, FolioChoice
from pocketmq.store.ha.master import HAService
from pocketmq.store.index_file import IndexService
from pocketmq.store.layout import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    LOCK_FILE,
    consume_queue_dir,
)
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.prefault import (
    MADV_POPULATE_READ,
    MADV_POPULATE_WRITE,
    PrefaultService,
    Target,
    fault_in_as,
)
from pocketmq.store.put_coalescer import PutCoalescer, split_put
from pocketmq.store.put_one import put_one
from pocketmq.store.results import GetResult, PutResult, PutStatus, QueryResult
from pocketmq.store.truncate import truncate_store

log = logging.getLogger(__name__)

FENCE_CLOSED = "this broker's master lease is not confirmed (failover): writes are refused"
# How far ahead of the CommitLog write position pages are faulted in (see prefault.py).
_PREFAULT_WINDOW = 32 << 20
ArrivalListener = Callable[[str, int, int], None]


class MessageStore:
    def __init__(self, config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.root = config.root
        # Stamps records and index files, and decides retention.
        self.clock = clock
        self.commitlog = CommitLog(config, clock=clock)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.index = IndexService(
            self.root / INDEX_DIR, config.max_hash_slot_num, config.max_index_num, clock=clock
        )
        dispatchers: list[Dispatcher] = [
            self._dispatch_cq,
            self._dispatch_index,
            self._dispatch_queue_table,
        ]
        self.reput = ReputService(self.commitlog, dispatchers, config.delay_levels_ms)
        # The HA port's side of replication, on every role as in RocketMQ (the broker binds
        # it); a slave also follows its master with a store.ha.slave.HAClient.
        self.ha_service = HAService(self.commitlog, config, clock)
        self.coalescer = PutCoalescer(self.append_units, self.acknowledged)
        # SYNC_MASTER acknowledgements in flight (a flush and a slave), each in a task held here.
        self._acks_waiting: set[asyncio.Future[Any]] = set()
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: FlushCommitLogService | None = None
        self.housekeeping: HousekeepingService | None = None
        self.prefault: PrefaultService | None = None
        # Called as (topic, queue id, last queue offset) once per run of one queue's units
        # written by a dispatch (a put): the broker wakes long-polling pulls from it.
        self.on_message_arrived: ArrivalListener | None = None
        self.last_exit_ok = True
        self.running = False
        self.disk_full = False
        self._lock_fd = -1
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        # Whether the CommitLog is faulted in as huge folios (folios.py): under ASYNC_FLUSH only.
        self.folio_choice = (
            FolioChoice(config.flush_interval_commit_log)
            if HUGE_FOLIO and not self._sync_flush
            else None
        )
        # How the disk use is read; tests replace it to simulate a filling disk.
        self.disk_usage: Callable[[Path], tuple[int, int]] = _disk_usage
        # The role now (the config's at start); a failover may change it while the store runs.
        # A slave's CommitLog is its master's copy: no put is accepted here. Every reader of
        # the CURRENT role (broker, HA, dispatch) reads this, never config.broker_role.
        self.role: BrokerRole = config.broker_role
        # The failover fence (FailoverCoordinator.may_accept_writes): a master whose lease is
        # not confirmed neither takes nor acknowledges a put. None without failover.
        self.write_fence: Callable[[], bool] | None = None
        # The end of the last put acknowledged as stored (what a slave must hold before the
        # sync-state set may name it).
        self.acked_through = 0
        # CommitLog bytes a pull may leave unread behind it before the store suggests the
        # slave: accessMessageInMemoryMaxRatio of the physical memory.
        self.memory_for_reads_bytes = (
            _physical_memory_bytes() * config.access_message_in_memory_max_ratio // 100
        )

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Load and recover the store, then start its threads.

        Raises:
            StoreError: another process holds the store, or its files cannot be loaded.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_directory()
        abort = self.root / ABORT_FILE
        self.last_exit_ok = not abort.exists()
        try:
            self.commitlog.load()
            self._load_consume_queues()
            if self.config.message_index_enable:
                self.index.load()
            self.checkpoint = StoreCheckpoint(self.root / CHECKPOINT_FILE)
            abort.touch()
            self._recover()
        except (OSError, ValueError) as exc:
            self._close_files()
            self._unlock_directory()
            raise StoreError(f"cannot open store {self.root}: {exc}") from exc
        self.flush_service = FlushCommitLogService(
            self.commitlog,
            self._sync_flush,
            self.config.flush_interval_commit_log,
            self.config.sync_flush_timeout,
            self._on_commitlog_flushed,
        )
        self.flush_service.start()
        self.housekeeping = HousekeepingService(
            [
                ("flush-logics", self.config.flush_interval_consume_queue, self.flush_logics),
                ("disk-check", 1000, self.check_disk),
                ("flush-timeouts", 100, self.flush_service.expire),
                ("retention", self.config.clean_resource_interval, self._retention_task),
            ]
        )
        self.housekeeping.start()
        window = min(_PREFAULT_WINDOW, self.config.mapped_file_size_commit_log // 2)
        # Faulted in clean, so that no flush writes the zeros ahead of the appends (prefault.py).
        targets: list[Target] = [
            (lambda: self.commitlog.mfq.warm_ranges(window), MADV_POPULATE_READ)
        ]
        if self.config.message_index_enable:
            targets.append(
                (lambda: self.index.warm_ranges(_PREFAULT_WINDOW // 8), MADV_POPULATE_WRITE)
            )
        housekeeping = [
            lambda: self.commitlog.mfq.prepare_next(window),
            lambda: self.commitlog.mfq.reserve_ahead(window),
        ]
        if self.folio_choice is not None:
            housekeeping.append(lambda: self.choose_folios(self.clock.monotonic()))
        self.prefault = PrefaultService(targets, housekeeping)
        self.prefault.start()
        self.running = True

    def choose_folios(self, now: float) -> None:
        """Sample the CommitLog's write rate at monotonic time ``now`` and have the segments
        being written faulted in as ``folio_choice`` says (folios.py; the prefault thread)."""
        choice = self.folio_choice
        segments = self.commitlog.mfq.being_written()
        if choice is None or not segments:
            return
        choice.sample(now, segments[0].file_from_offset + segments[0].wrote_position)
        for mf in segments:
            if mf.huge is not choice.huge:
                fault_in_as(mf, choice.huge)

    def close(self) -> None:
        """Flush everything and mark a clean exit."""
        if not self.running:
            return
        self.running = False
        if self.prefault is not None:
            self.prefault.stop()
        if self.housekeeping is not None:
            self.housekeeping.stop()
        if self.flush_service is not None:
            self.flush_service.stop()
        try:
            self.reput.pump()
            caught_up = True
        except OSError as exc:
            # No room for a consume-queue or index file: the records are safe in the CommitLog,
            # so close anyway and keep the abort marker, letting the next open re-dispatch them.
            log.error("closing with dispatch behind the commitlog: %s", exc)
            caught_up = False
        self.commitlog.flush()
        self.flush_logics()
        self._close_files()
        if caught_up:
            (self.root / ABORT_FILE).unlink(missing_ok=True)
        self._unlock_directory()

    def _close_files(self) -> None:
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.close()
        self.index.close()
        self.commitlog.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
            self.checkpoint = None

    def _lock_directory(self) -> None:
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StoreError(f"store {self.root} is in use by another process") from exc
        self._lock_fd = fd

    def _unlock_directory(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    async def __aenter__(self) -> MessageStore:
        self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ recovery

    def _load_consume_queues(self) -> None:
        base = self.root / CONSUME_QUEUE_DIR
        if not base.is_dir():
            return
        for topic_dir in sorted(base.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.name.isdigit():
                    continue
                cq = self._new_consume_queue(topic_dir.name, int(queue_dir.name))
                cq.load()

    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(
            topic,
            queue_id,
            consume_queue_dir(self.root, topic, queue_id),
            self.config.mapped_file_size_consume_queue,
        )
        self.consume_queue_table.setdefault(topic, {})[queue_id] = cq
        return cq

    def _recover(self) -> None:
        for cq in self.all_queues():
            cq.recover()
        assert self.checkpoint is not None
        if self.last_exit_ok:
            end = self.commitlog.recover_normally()
        else:
            min_ts = (
                self.checkpoint.min_timestamp_index()
                if self.config.message_index_safe
                else self.checkpoint.min_timestamp()
            )
            log.warning("store %s was not shut down cleanly: abnormal recovery", self.root)

            def redispatch(info: RecordInfo) -> None:
                self.reput.dispatch(request_from_record(info, self.config.delay_levels_ms))

            end = self.commitlog.recover_abnormally(min_ts, redispatch)
        for cq in self.all_queues():
            cq.truncate_dirty(end)
        if self.config.message_index_enable and self.index.end_phy_offset() >= end:
            self.index.truncate(end)
        self.reput.reput_from = self._reput_start()
        dispatched = self.reput.pump()
        if dispatched:
            log.info("dispatched %d records to consume queues and the index", dispatched)
        for cq in self.all_queues():
            self.commitlog.topic_queue_table[(cq.topic, cq.queue_id)] = cq.max_offset_in_queue()
            cq.correct_min_offset(self.commitlog.min_offset())

    def _reput_start(self) -> int:
        """Where dispatch resumes: past every record known to be in the queues and index."""
        cq_end = max((cq.max_physic_offset for cq in self.all_queues()), default=-1)
        start = cq_end
        if self.config.message_index_enable:
            start = min(start, self.index.end_phy_offset())
        return min(max(start, self.commitlog.min_offset()), self.commitlog.max_offset())

    def all_queues(self) -> list[ConsumeQueue]:
        return [
            cq for queues in list(self.consume_queue_table.values()) for cq in list(queues.values())
        ]

    # ------------------------------------------------------------------ dispatch

    def _dispatch_cq(self, reqs: list[DispatchRequest]) -> None:
        table = self.consume_queue_table
        i = next_queued(reqs, 0)
        n = len(reqs)
        # One wake-up per queue a dispatch wrote to, once it is done (a read's sends interleave
        # queues, a run a unit): the waiters (pull hold, POP, schedule, timer) look at
        # everything up to the offset they are given (a unit written before a failure
        # included).
        arrived: dict[tuple[str, int], int] = {}
        try:
            while i < n:
                req = reqs[i]
                queues = table.get(req.topic)
                cq = queues.get(req.queue_id) if queues else None
                if cq is None:
                    cq = self._new_consume_queue(req.topic, req.queue_id)
                try:
                    i, end = cq.put_requests(reqs, i)
                except BaseException:
                    end = cq.max_offset_in_queue()
                    raise
                finally:
                    if end > 0:
                        arrived[(req.topic, req.queue_id)] = end - 1
        finally:
            listener = self.on_message_arrived
            if listener is not None:
                for (topic, queue_id), offset in arrived.items():
                    listener(topic, queue_id, offset)

    def _dispatch_queue_table(self, reqs: list[DispatchRequest]) -> None:
        # A slave never puts: its next queue offsets come from what it replicates (a master's
        # come from its puts, which may run ahead of dispatch).
        if self.role is not BrokerRole.SLAVE:
            return
        table = self.commitlog.topic_queue_table
        for req in reqs:
            if goes_to_consume_queue(req.sys_flag):
                table[(req.topic, req.queue_id)] = req.queue_offset + 1

    def _dispatch_index(self, reqs: list[DispatchRequest]) -> None:
        if self.config.message_index_enable:
            self.index.build_index_batch(reqs)

    # ------------------------------------------------------------------ writes

    def _refusal(self) -> PutResult | None:
        if not self.running:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE, detail="the message store is not running"
            )
        if self.role is BrokerRole.SLAVE:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                detail="the broker's role is SLAVE: messages are put to its master",
            )
        if not self.may_write():
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, detail=FENCE_CLOSED)
        if self.disk_full:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                detail="the disk is full: writes are refused until space is freed",
            )
        return None

    def may_write(self) -> bool:
        """Whether the failover fence lets this master take and acknowledge puts now."""
        fence = self.write_fence
        return fence is None or fence()

    def append(self, msgs: list[MessageExt]) -> PutResult:
        """Append and dispatch, without waiting for a flush (see put_messages)."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        if len(msgs) == 1 and (result := self._append_one(msgs[0])) is not None:
            return result
        result, reqs = self.commitlog.put(msgs)
        if result.ok:
            self._appended(result, reqs)
        return result

    def append_units(self, units: list[list[MessageExt]]) -> list[PutResult]:
        """Several appends (each what ``append`` takes) as one CommitLog put, in order, each
        with its own result. When the log refuses the whole (a unit too large or with bad
        properties, a refusal of the store), each unit is appended alone instead, so that it
        gets the answer it would have had alone."""
        if len(units) > 1 and self._refusal() is None:
            result, reqs = self.commitlog.put([msg for unit in units for msg in unit])
            if result.ok:
                self._appended(result, reqs)
                return split_put(result, reqs, [len(unit) for unit in units])
        return [self.append(unit) for unit in units]

    def _wake_prefault(self) -> MappedFile | None:
        """Wakes the prefault thread when the appends near its mark; the last segment."""
        last = self.commitlog.mfq.last()
        if self.prefault is not None and last is not None and last.wrote_position >= last.wake_at:
            self.prefault.wake()
        return last

    def _appended(self, result: PutResult, reqs: list[DispatchRequest]) -> None:
        self._wake_prefault()
        try:
            self.reput.feed(reqs, result.next_offset)
        except OSError as exc:
            # The record is in the CommitLog; dispatch catches up once space is back.
            log.error("dispatch lags: %s", exc)
        self.ha_service.notify_appended()

    def _append_one(self, msg: MessageExt) -> PutResult | None:
        """``append`` of one message the short way (store/put_one.py), None when it does
        not take it (nothing was written then): ``CommitLog.put`` does."""
        commitlog = self.commitlog
        reput = self.reput
        queues = self.consume_queue_table.get(msg.topic)
        cq = queues.get(msg.queue_id) if queues else None
        with commitlog.put_lock:
            mf = commitlog.one_put_segment()
            # With dispatch behind, the record's turn comes after those waiting (reput.feed).
            if mf is None or reput.reput_from != mf.file_from_offset + mf.wrote_position:
                return None
            store_ts = self.clock.now_ms()
            try:
                done = put_one(msg, mf, commitlog.put_args, cq, store_ts)
            except RecordEncodeError:
                return None  # the general put answers with the refusal
        if done is None:
            return None
        req, queue_end = done
        result = PutResult(
            PutStatus.PUT_OK, [req.phy_offset], req.queue_offset, req.size, store_ts,
            commitlog.store_host,
        )  # fmt: skip
        self._wake_prefault()
        reqs = [req]
        try:
            if queue_end < 0:
                self._dispatch_cq(reqs)
            elif queue_end > 0 and (listener := self.on_message_arrived) is not None:
                listener(req.topic, req.queue_id, queue_end - 1)
            self._dispatch_index(reqs)
            # A master's dispatch ends here: _dispatch_queue_table is a slave's, which never puts.
            reput.reput_from = result.next_offset
            reput.last_store_timestamp = store_ts
        except OSError as exc:
            log.error("dispatch lags: %s", exc)
        self.ha_service.notify_appended()
        return result

    def append_replica(self, phy_offset: int, data: memoryview) -> None:
        """Append bytes a master replicated (see CommitLog.append_data), then dispatch the
        records they complete to consume queues and the index, waking long polls.

        Raises:
            StoreError: the store is not running, or the bytes cannot be appended there.
        """
        if not self.running:
            raise StoreError("the message store is not running")
        self.commitlog.append_data(phy_offset, data)
        last = self._wake_prefault()
        try:
            self.reput.pump()
        except OSError as exc:
            log.error("dispatch lags: %s", exc)
        if last is not None:
            # What the checkpoint records once the flush thread has synced these bytes.
            last.store_timestamp = self.reput.last_store_timestamp
        self.ha_service.notify_appended()

    async def put_message(self, msg: MessageExt) -> PutResult:
        return await self.put_messages([msg])

    async def put_messages(self, msgs: list[MessageExt]) -> PutResult:
        """Append a message or several (a batch for one queue, or records of several queues
        that must land together); under SYNC_FLUSH return once durable (or with
        FLUSH_DISK_TIMEOUT), unless the first message says WAIT=false."""
        return await self.flushed(self.append(msgs), msgs)

    def put_coalesced(
        self, units: list[list[MessageExt]]
    ) -> list[PutResult | Pending[PutResult] | Exception]:
        """``put_messages`` of each unit, appended in one CommitLog put with the other
        ``put_coalesced`` units of this event-loop iteration (see PutCoalescer): for producers'
        sends, which arrive many at once when several are in flight. Each unit's result itself
        when nothing is left to wait for (an iteration's first puts, under ASYNC_FLUSH without
        a slave to wait for), the exception its acknowledgement raised, or else a Pending of
        either: a send that needs no wait needs no coroutine, and one held needs no task.

        Raises:
            Exception: what the append at once raised (then nothing was appended).
        """
        return self.coalescer.append_run(units)

    async def flushed(self, result: PutResult, msgs: list[MessageExt]) -> PutResult:
        """``result`` of ``append(msgs)`` once its records are durable (SYNC_FLUSH) and on a
        slave (SYNC_MASTER), both awaited at once, as ``put_messages`` waits; for a caller
        that must note what it appended before anything else runs. The records stay in the
        log whatever the answer (FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT),
        as in RocketMQ."""
        done = self.acknowledged(result, msgs)
        return done if isinstance(done, PutResult) else await outcome_of(done)

    def acknowledged(
        self, result: PutResult, msgs: list[MessageExt]
    ) -> PutResult | Pending[PutResult]:
        """``flushed``: the result itself when there is nothing to wait for, else a Pending
        of it. A SYNC_FLUSH put is answered from the flush's callback; a SYNC_MASTER put
        waits for a flush and a slave at once, in a task."""
        if not result.ok or msgs[0].properties.get(MessageConst.WAIT_STORE_MSG_OK) == "false":
            return result
        if self.role is BrokerRole.SYNC_MASTER:
            return pending_of(self._durable(result), self._acks_waiting)
        flush = self.flush_service
        if self._sync_flush and flush is not None and result.next_offset > flush.durable_through():
            return self._answered_when_flushed(result, flush)
        return self._fenced(result)

    def _answered_when_flushed(
        self, result: PutResult, flush: FlushCommitLogService
    ) -> Pending[PutResult]:
        later: Pending[PutResult] = Pending()

        def flushed(ok: bool) -> None:
            later.then(self._fenced(result if ok else _not_flushed(result)))

        flush.when_durable(result.next_offset, asyncio.get_running_loop(), flushed)
        return later

    async def _durable(self, result: PutResult) -> PutResult:
        flush = None
        if self._sync_flush and self.flush_service is not None:
            flush = self.flush_service.request(result.next_offset, asyncio.get_running_loop())
        replica = None
        slave_missing = False
        if self.role is BrokerRole.SYNC_MASTER:
            ha = self.ha_service
            if ha.is_slave_ok(result.next_offset):
                replica = ha.wait_for_slave(result.next_offset, self.config.sync_flush_timeout)
            else:
                slave_missing = True
        if flush is not None and not await flush:
            _not_flushed(result)
        if slave_missing:
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            result.detail = "the message was written, but no slave is in sync to replicate it"
        elif replica is not None and not await replica:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            result.detail = "the message was written but not replicated to a slave in time"
        return self._fenced(result)

    def _fenced(self, result: PutResult) -> PutResult:
        """A successful put acknowledged, unless this broker's lease ended meanwhile: a new
        master may not hold it, so it is not (the producer retries; a duplicate at worst)."""
        if result.status is PutStatus.PUT_OK:
            if not self.may_write():
                result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
                result.detail = FENCE_CLOSED
            else:
                self.acked_through = max(self.acked_through, result.next_offset)
        return result

    # ------------------------------------------------------------------ reads

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        return queues.get(queue_id) if queues else None

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetResult:
        """Up to max_msg_nums records of a queue from offset on (DefaultMessageStore.getMessage;
        see ``store.pull_read``)."""
        return pull_read.get_message(self, topic, queue_id, offset, max_msg_nums, message_filter)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """Decode the record at a CommitLog offset (None if it is not there)."""
        raw = self.commitlog.read_record(phy_offset)
        if raw is None:
            return None
        try:
            return decode_message(raw)
        except RecordError:
            return None

    def select_one_message_by_offset(
        self, phy_offset: int, size: int | None = None
    ) -> bytes | None:
        if size is None:
            return self.commitlog.read_record(phy_offset)
        return self.commitlog.read(phy_offset, size)

    def view_message_by_id(self, msg_id: str) -> MessageExt | None:
        """Look up an offset message id (store host + CommitLog offset).

        Raises:
            ProtocolError: msg_id is not an offset message id.
        """
        _, phy = decode_offset_msg_id(msg_id)
        return self.look_message_by_offset(phy)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> QueryResult:
        """Records of topic whose KEYS or UNIQ_KEY contain key, stored in the time range."""
        return query.query_by_key(self, topic, key, max_num, begin_timestamp, end_timestamp)

    # ------------------------------------------------------------------ offsets

    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset()

    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset()

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset_in_queue() if cq else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message will get (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.max_offset_in_queue() if cq else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.unit(queue_offset) if cq else None
        return unit[0] if unit else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.unit(queue_offset) if cq else None
        if unit is None or unit[1] == BLANK_UNIT_SIZE:
            return -1
        return self.commitlog.store_timestamp_at(unit[0])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset_in_queue())

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first queue offset stored at or after timestamp; the max offset if none is."""
        return query.offset_by_time(self, topic, queue_id, timestamp)

    def topics(self) -> list[str]:
        return sorted(self.consume_queue_table)

    def delete_topics(self, topics: set[str]) -> int:
        """Drop the consume queues of topics (their records age out of the CommitLog)."""
        deleted = 0
        for topic in topics:
            queues = self.consume_queue_table.pop(topic, {})
            for cq in queues.values():
                cq.destroy()
                deleted += 1
            for qid in queues:
                self.commitlog.topic_queue_table.pop((topic, qid), None)
            shutil.rmtree(self.root / CONSUME_QUEUE_DIR / topic, ignore_errors=True)
        return deleted

    # ------------------------------------------------------------------ background work

    def _on_commitlog_flushed(self, store_timestamp: int) -> None:
        if self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = store_timestamp

    def flush_logics(self) -> None:
        """Sync consume queues and the index, then record how far they are durable."""
        ts = self.reput.last_store_timestamp
        for cq in self.all_queues():
            try:
                cq.flush()
            except ValueError:
                continue
        if self.config.message_index_enable:
            self.index.flush()
        cp = self.checkpoint
        if cp is not None:
            if ts:
                cp.logics_msg_timestamp = ts
                cp.index_msg_timestamp = ts
            cp.flush()

    def check_disk(self) -> None:
        """Refuse writes while the disk is past diskSpaceWarningLevelRatio."""
        retention.check_disk(self)

    def _retention_task(self) -> None:
        self.run_retention()

    def run_retention(self) -> int:
        """Delete expired files (see ``store.retention``); returns the CommitLog files removed."""
        return retention.run_retention(self)

    def truncate(self, phy_offset: int) -> None:
        """Drop every record at or after ``phy_offset``, a record boundary (store.truncate)."""
        truncate_store(self, phy_offset)


def _not_flushed(result: PutResult) -> PutResult:
    result.status = PutStatus.FLUSH_DISK_TIMEOUT
    result.detail = "the message was written but not flushed in time"
    return result


def _physical_memory_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _disk_usage(path: Path) -> tuple[int, int]:
    usage = shutil.disk_usage(path)
    return usage.used, usage.total
