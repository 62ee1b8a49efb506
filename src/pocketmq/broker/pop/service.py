"""POP consumption (RocketMQ 5's PopMessageProcessor, AckMessageProcessor and
ChangeInvisibleTimeProcessor), which the 5.x gRPC endpoint serves.

A consumer pops messages instead of pulling a queue it owns: the broker picks them from any
queue of the topic and makes them invisible to the group for an invisible duration, with a
receipt handle per message. An ack ends a message's life in the group; a message not acked in
time becomes visible again with delivery attempt + 1 (see ``revive``), and goes to
``%DLQ%{group}`` once the group's maximum of deliveries is spent.

- Concurrent groups: popping moves the group's offset past the messages at once, as RocketMQ
  does; later pops also read the group's POP retry topic (one pop in five looks there first).
- FIFO groups: the offset moves only over acked messages, and a queue with messages in flight
  is skipped, so one queue, hence one message group, is consumed in order one batch at a time.
  When the deadline passes, the same messages are popped again, with the attempt counted.

State that must survive a crash lives in the CommitLog, in the revive log (see ``records``).
On load the log is replayed from the oldest checkpoint still in flight (kept as the offset of
``CID_RMQ_SYS_REVIVE_GROUP``), which rebuilds deadlines, FIFO attempts and offsets. Every
time is read from the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pop.handle import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.inflight import InFlight, InFlightTable, Key
from pocketmq.broker.pop.records import (
    ACK_TAG,
    CK_TAG,
    AckRecord,
    PopCheckpoint,
    UnreadableRecord,
    record_message,
)
from pocketmq.broker.pop.revive import PopReviveService
from pocketmq.broker.stats import Protocol
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.names import (
    PERM_READ,
    REVIVE_GROUP,
    is_retry_topic,
    pop_retry_topic,
    revive_topic,
)
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore
from pocketmq.store.filter import MessageFilter
from pocketmq.store.results import GetStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.messaging import MessagingService

log = logging.getLogger(__name__)

# The share of pops that look in the retry topic first (popFromRetryProbability, percent).
POP_FROM_RETRY_PROBABILITY = 20
# A message within this many CommitLog bytes of its end is "in memory" (4.x's
# accessMessageInMemoryMaxRatio, 40% of physical memory): a new group of a queue whose first
# message is that young starts at the beginning.
_IN_MEMORY_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 0.4


@dataclass(slots=True)
class Popped:
    """One message handed to a consumer."""

    msg: MessageExt  # as stored; topic, queue id and offset are where it was popped from
    topic: str  # the topic the consumer subscribed to
    handle: str
    attempt: int  # 1 for the first delivery
    invisible_ms: int


@dataclass(slots=True)
class PopRequest:
    group: str
    topic: str
    max_nums: int
    invisible_ms: int
    tags: MessageFilter | None  # the store's filter: tag hashes or a SQL92 selector
    tag_set: frozenset[str] | None  # tag names rechecked (hashes may collide); None: none
    fifo: bool
    max_attempts: int


# Messages found to be dead while popping: (message, key, its delivery if in flight).
_Dead = list[tuple[MessageExt, Key, InFlight | None]]


class PopService:
    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        topics: TopicConfigManager,
        cluster: str,
        broker_name: str,
        max_attempts_of: Callable[[str], int],
        messaging: MessagingService,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.broker_name = broker_name
        self.clock = clock
        self.revive_topic = revive_topic(cluster)
        self.table = InFlightTable()
        self.reviver = PopReviveService(self, store, messaging, clock, max_attempts_of)
        self.stats = messaging.stats
        self._turn = 0
        # Pops waiting for a message to arrive in a topic, or a FIFO queue to unblock.
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        # Pops woken so far: a sender compares it around its put.
        self.woken = 0
        self._last_pop_time = 0

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Replay the revive log from the oldest checkpoint that was still in flight."""
        start = max(self.offsets.query(REVIVE_GROUP, self.revive_topic, 0), 0)
        cq = self.store.find_consume_queue(self.revive_topic, 0)
        if cq is None:
            return
        records = 0
        offset = max(start, cq.min_offset_in_queue())
        while True:
            result = self.store.get_message(self.revive_topic, 0, offset, 256)
            if result.status is not GetStatus.FOUND:
                break
            for raw, qo in zip(result.messages, result.queue_offsets, strict=True):
                self._replay(decode_message(raw), qo)
                records += 1
            offset = result.next_begin_offset
        for queue in self.table.fifo_queues():
            self._advance_fifo(*queue)
        if records:
            log.info("pop state replayed: %d records, %d in flight", records, len(self.table))

    def _replay(self, rec: MessageExt, revive_offset: int) -> None:
        try:
            if rec.tags == CK_TAG:
                self._replay_ck(PopCheckpoint.from_json(rec.body), revive_offset)
            elif rec.tags == ACK_TAG:
                ack = AckRecord.from_json(rec.body)
                key = (ack.group, ack.topic, ack.queue_id, ack.ack_offset)
                entry = self.table.get(key)
                if entry is not None and entry.pop_time == ack.pop_time:
                    self.resolve(key, entry)
        except UnreadableRecord as exc:
            log.error("revive record %d is unreadable, skipped: %s", revive_offset, exc)

    def _replay_ck(self, ck: PopCheckpoint, revive_offset: int) -> None:
        for offset, reconsume in ck.messages():
            entry = InFlight(
                ck.pop_time, ck.deadline, revive_offset, reconsume, ck.fifo, ck.subscribed
            )
            self._add((ck.group, ck.topic, ck.queue_id, offset), entry)
        if ck.fifo:
            state = self.table.fifo_queue((ck.group, ck.topic, ck.queue_id))
            for offset, reconsume in ck.messages():
                state.attempts[offset] = reconsume + 1
            # Offsets of the popped range that were not delivered were filtered out.
            committed = self.offsets.query(ck.group, ck.topic, ck.queue_id)
            popped = range(max(ck.start_offset, committed), ck.next_begin)
            state.done.update(set(popped) - set(ck.queue_offsets))
        elif ck.next_begin > self.offsets.query(ck.group, ck.topic, ck.queue_id):
            self.offsets.commit(ck.group, ck.topic, ck.queue_id, ck.next_begin)

    async def start(self) -> None:
        self.reviver.start()

    async def stop(self) -> None:
        await self.reviver.stop()
        self.persist()
        for topic in list(self._waiters):
            self.notify(topic)

    async def revive_due(self) -> int | None:
        """Revive what is due by the clock now; returns ms until the next deadline (None:
        nothing in flight). The revive loop calls this at each deadline."""
        return await self.reviver.revive_due()

    def persist(self) -> None:
        """Move the replay start up to the oldest checkpoint still in flight (the offsets
        file itself is written by the broker)."""
        oldest = self.table.oldest_checkpoint()
        if oldest is None:
            oldest = self.store.get_max_offset_in_queue(self.revive_topic, 0)
        self.offsets.commit(REVIVE_GROUP, self.revive_topic, 0, oldest)

    def notify(self, topic: str) -> None:
        """Pops waiting on ``topic`` look again."""
        for fut in self._waiters.pop(topic, ()):
            if not fut.done():
                fut.set_result(None)
                self.woken += 1

    # ------------------------------------------------------------------ in-flight table

    def _add(self, key: Key, entry: InFlight) -> None:
        if self.table.add(key, entry):
            self.reviver.wake()

    def resolve(self, key: Key, entry: InFlight) -> None:
        """The message is done with in the group: acked, dead-lettered or revived."""
        self.table.remove(key)
        if entry.fifo:
            group, topic, queue_id, offset = key
            self.table.fifo_queue((group, topic, queue_id)).done.add(offset)
            self._advance_fifo(group, topic, queue_id)
            self.notify(topic)

    async def settle(self, key: Key, entry: InFlight) -> None:
        """Resolved, and its ack record written to the revive log."""
        self.resolve(key, entry)
        await self._put_log([self._ack_record(key, entry)])

    def _advance_fifo(self, group: str, topic: str, queue_id: int) -> None:
        state = self.table.fifo_queue_if_any((group, topic, queue_id))
        if state is None:
            return
        committed = self.offsets.query(group, topic, queue_id)
        advanced = state.advance(committed)
        if advanced != committed:
            self.offsets.commit(group, topic, queue_id, advanced)

    def _entry(self, group: str, handle: ReceiptHandle, topic: str) -> tuple[Key, InFlight]:
        real = pop_retry_topic(group, topic) if handle.retry else topic
        key = (group, real, handle.queue_id, handle.queue_offset)
        entry = self.table.get(key)
        if entry is None or entry.pop_time != handle.pop_time:
            raise InvalidReceiptHandle(
                "the receipt handle is stale: the message was acked, or its invisible time "
                "changed or ran out since"
            )
        if entry.deadline <= self.clock.now_ms():
            raise InvalidReceiptHandle("the receipt handle has expired")
        return key, entry

    # ------------------------------------------------------------------ pop

    async def pop(self, req: PopRequest, poll_ms: int) -> list[Popped]:
        """Up to ``max_nums`` messages, waiting up to ``poll_ms`` for the first one."""
        deadline = self.clock.monotonic() + poll_ms / 1000
        topics = (req.topic, pop_retry_topic(req.group, req.topic))
        # After a wait timed out, one last look: the clock may be one the wait did not move.
        timed_out = False
        while True:
            # Registered before looking, so that an arrival during the look is not missed.
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for topic in topics:
                self._waiters.setdefault(topic, set()).add(fut)
            try:
                looked_ms = self.clock.now_ms()
                found = await self._pop_once(req)
                remaining = deadline - self.clock.monotonic()
                if found or remaining <= 0 or timed_out:
                    self._count(req.group, found, self.clock.now_ms() - looked_ms)
                    return found
                try:
                    async with asyncio.timeout(remaining):  # not wait_for: see pull_hold.py
                        await fut
                except TimeoutError:
                    timed_out = True
            finally:
                for topic in topics:
                    waiting = self._waiters.get(topic)
                    if waiting is not None:
                        waiting.discard(fut)
                        if not waiting:
                            del self._waiters[topic]

    def _count(self, group: str, popped: list[Popped], latency_ms: int) -> None:
        """One pop answer in the group's get statistics, per topic read (the topic and its
        POP retry topic); only the gRPC edge pops."""
        if not popped:
            self.stats.on_get(group, "", 0, 0, latency_ms, Protocol.GRPC)
            return
        by_topic: dict[str, list[int]] = {}
        for p in popped:
            nums_size = by_topic.setdefault(p.msg.topic, [0, 0])
            nums_size[0] += 1
            nums_size[1] += p.msg.store_size
        for topic, (nums, size) in by_topic.items():
            self.stats.on_get(group, topic, nums, size, latency_ms, Protocol.GRPC)

    async def _pop_once(self, req: PopRequest) -> list[Popped]:
        cfg = self.topics.get(req.topic)
        if cfg is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic {req.topic} does not exist")
        if not cfg.perm & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{req.topic}] pulling message is forbidden"
            )
        pop_time = self._pop_time()
        sources = [(req.topic, q) for q in _rotate(range(cfg.read_queue_nums), self._turn)]
        self._turn += 1
        if not req.fifo:
            retry = pop_retry_topic(req.group, req.topic)
            retry_cfg = self.topics.get(retry)
            if retry_cfg is not None:
                retry_queues = [(retry, q) for q in range(retry_cfg.read_queue_nums)]
                if random.randrange(100) < POP_FROM_RETRY_PROBABILITY:
                    sources = retry_queues + sources
                else:
                    sources += retry_queues
        popped: list[Popped] = []
        batches: list[tuple[MessageExt, list[Popped]]] = []
        dead: _Dead = []
        for topic, queue_id in sources:
            if len(popped) >= req.max_nums:
                break
            got = self._pop_queue(req, topic, queue_id, pop_time, req.max_nums - len(popped), dead)
            if got:
                popped += got
                batches.append((self._ck_record(req, topic, queue_id, pop_time, got), got))
        for msg, key, entry in dead:
            await self.reviver.dead_letter(req.group, msg, key, entry)
        if batches:
            result = await self.store.put_messages([ck for ck, _ in batches])
            if not result.ok:
                # Not delivered; the messages stay in flight and come back at their deadline.
                log.error("pop checkpoint not stored (%s): %s", result.status.value, result.detail)
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"pop failed: {result.detail}")
            for i, (_, got) in enumerate(batches):
                for p in got:
                    key = (req.group, p.msg.topic, p.msg.queue_id, p.msg.queue_offset)
                    entry = self.table.get(key)
                    if entry is not None:
                        entry.ck_offset = result.queue_offset + i
        return popped

    def _pop_time(self) -> int:
        # Strictly increasing: a handle is told from the one it replaced by its pop time.
        self._last_pop_time = max(self.clock.now_ms(), self._last_pop_time + 1)
        return self._last_pop_time

    def _init_offset(self, topic: str, queue_id: int) -> int:
        """Where a group new to a queue starts (PopMessageProcessor.getInitOffset): a retry
        topic at its start; a queue whose first message is still in memory at its start;
        otherwise at its last message."""
        min_offset = self.store.get_min_offset_in_queue(topic, queue_id)
        if is_retry_topic(topic):
            return min_offset
        max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
        if min_offset <= 0 < max_offset:
            phy = self.store.get_commit_log_offset_in_queue(topic, queue_id, 0)
            if phy >= 0 and self.store.max_phy_offset() - phy <= _IN_MEMORY_BYTES:
                return 0
        return max(max_offset - 1, 0)

    def _pop_queue(
        self,
        req: PopRequest,
        topic: str,
        queue_id: int,
        pop_time: int,
        want: int,
        dead: _Dead,
    ) -> list[Popped]:
        group = req.group
        if req.fifo and self.table.blocked((group, topic, queue_id), pop_time):
            return []
        offset = self.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self._init_offset(topic, queue_id)
            self.offsets.commit(group, topic, queue_id, offset)
        state = self.table.fifo_queue((group, topic, queue_id)) if req.fifo else None
        popped: list[Popped] = []
        while len(popped) < want:
            result = self.store.get_message(topic, queue_id, offset, want - len(popped), req.tags)
            if result.status is not GetStatus.FOUND:
                if result.status is GetStatus.OFFSET_TOO_SMALL or (
                    result.status is GetStatus.OFFSET_OVERFLOW_BADLY
                ):
                    offset = result.next_begin_offset  # retention removed them
                    self.offsets.commit(group, topic, queue_id, offset)
                    continue
                if state is not None:
                    state.done.update(range(offset, result.next_begin_offset))
                elif result.next_begin_offset > offset:
                    self.offsets.commit(group, topic, queue_id, result.next_begin_offset)
                break
            matched = dict(zip(result.queue_offsets, result.messages, strict=True))
            for qo in range(offset, result.next_begin_offset):
                raw = matched.get(qo)
                if state is not None and qo in state.done:
                    continue
                msg = decode_message(raw) if raw is not None else None
                if msg is None or (req.tag_set is not None and msg.tags not in req.tag_set):
                    if state is not None:
                        state.done.add(qo)
                    continue
                key = (group, topic, queue_id, qo)
                reconsume = state.attempts.get(qo, 0) if state is not None else msg.reconsume_times
                old = self.table.get(key)
                if state is not None and old is not None and old.deadline > pop_time:
                    break  # still invisible: later ones wait for it
                if reconsume >= req.max_attempts:
                    dead.append((msg, key, old))
                    if state is not None:
                        state.done.add(qo)
                    continue
                if state is not None:
                    state.attempts[qo] = reconsume + 1
                self._add(key, InFlight(pop_time, pop_time + req.invisible_ms, -1, reconsume,
                                        req.fifo, req.topic))  # fmt: skip
                handle = ReceiptHandle(
                    offset, pop_time, req.invisible_ms, topic != req.topic, self.broker_name,
                    queue_id, qo,
                )  # fmt: skip
                popped.append(Popped(msg, req.topic, handle.encode(), reconsume + 1,
                                     req.invisible_ms))  # fmt: skip
                if len(popped) >= want:
                    result.next_begin_offset = qo + 1
                    break
            if state is None:
                self.offsets.commit(group, topic, queue_id, result.next_begin_offset)
            else:
                self._advance_fifo(group, topic, queue_id)
            if offset == result.next_begin_offset or (state is not None and popped):
                break  # FIFO: one batch per queue, in order
            offset = result.next_begin_offset
        return popped

    # ------------------------------------------------------------------ revive-log records

    def _ck_record(
        self, req: PopRequest, topic: str, queue_id: int, pop_time: int, got: list[Popped]
    ) -> MessageExt:
        next_begin = (
            self.offsets.query(req.group, topic, queue_id)
            if not req.fifo
            else got[-1].msg.queue_offset + 1
        )
        ck = PopCheckpoint(
            group=req.group, topic=topic, queue_id=queue_id,
            start_offset=got[0].msg.queue_offset, pop_time=pop_time,
            invisible_ms=req.invisible_ms, queue_offsets=tuple(p.msg.queue_offset for p in got),
            broker_name=self.broker_name, next_begin=next_begin,
            reconsumes=tuple(p.attempt - 1 for p in got), fifo=req.fifo, subscribed=req.topic,
        )  # fmt: skip
        return self._record(ck)

    def _ack_record(self, key: Key, entry: InFlight) -> MessageExt:
        group, topic, queue_id, offset = key
        ack = AckRecord(
            group=group, topic=topic, queue_id=queue_id, ack_offset=offset, start_offset=offset,
            pop_time=entry.pop_time, broker_name=self.broker_name,
        )  # fmt: skip
        return self._record(ack)

    def _record(self, record: PopCheckpoint | AckRecord) -> MessageExt:
        return record_message(
            record, self.revive_topic, self.clock.now_ms(), self.store.commitlog.store_host
        )

    async def _put_log(self, records: list[MessageExt]) -> PutResult:
        result = await self.store.put_messages(records)
        if not result.ok:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"revive log put failed: {result.detail}")
        return result

    # ------------------------------------------------------------------ ack, change, DLQ

    async def ack(self, group: str, topic: str, handle_text: str) -> None:
        """Raises:
        InvalidReceiptHandle: a malformed, stale or expired handle."""
        key, entry = self._entry(group, ReceiptHandle.decode(handle_text), topic)
        await self.settle(key, entry)

    async def change_invisible(
        self, group: str, topic: str, handle_text: str, invisible_ms: int
    ) -> str:
        """Make the message invisible for ``invisible_ms`` from now; returns the new handle,
        which replaces the old one.

        Raises:
            InvalidReceiptHandle: a malformed, stale or expired handle.
        """
        handle = ReceiptHandle.decode(handle_text)
        key, entry = self._entry(group, handle, topic)
        pop_time = self._pop_time()
        new = InFlight(pop_time, pop_time + invisible_ms, -1, entry.reconsume, entry.fifo,
                       entry.subscribed)  # fmt: skip
        self._add(key, new)
        ck = PopCheckpoint(
            group=group, topic=key[1], queue_id=key[2], start_offset=handle.queue_offset,
            pop_time=pop_time, invisible_ms=invisible_ms, queue_offsets=(handle.queue_offset,),
            broker_name=self.broker_name, next_begin=handle.queue_offset + 1,
            reconsumes=(entry.reconsume,), fifo=entry.fifo, subscribed=entry.subscribed,
        )  # fmt: skip
        result = await self._put_log([self._record(ck), self._ack_record(key, entry)])
        new.ck_offset = result.queue_offset
        return ReceiptHandle(
            handle.queue_offset, pop_time, invisible_ms, handle.retry, self.broker_name,
            handle.queue_id, handle.queue_offset,
        ).encode()  # fmt: skip

    async def forward_to_dead_letter(self, group: str, topic: str, handle_text: str) -> None:
        """A consumer gave up on a message (FIFO clients after their local retries).

        Raises:
            InvalidReceiptHandle: a malformed, stale or expired handle.
        """
        key, entry = self._entry(group, ReceiptHandle.decode(handle_text), topic)
        msg = self.reviver.look(key)
        if msg is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"message {key} is no longer stored")
        await self.reviver.dead_letter(group, msg, key, entry)


def _rotate(items: range, turn: int) -> list[int]:
    if not items:
        return []
    start = turn % len(items)
    return list(items[start:]) + list(items[:start])
