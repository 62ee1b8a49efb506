"""POP consumption (RocketMQ 5's PopMessageProcessor, AckMessageProcessor,
ChangeInvisibleTimeProcessor and PopReviveService), which the 5.x gRPC endpoint serves.

A consumer pops messages instead of pulling a queue it owns: the broker picks them from any
queue of the topic and makes them invisible to the group for an invisible duration, with a
receipt handle per message. An ack ends a message's life in the group; a message not acked in
time becomes visible again with delivery attempt + 1, and goes to ``%DLQ%{group}`` once the
group's maximum of deliveries is spent.

- Concurrent groups: popping moves the group's offset past the messages at once, as RocketMQ
  does. An unacked message is *revived* at its deadline: copied into the pop retry topic
  ``%RETRY%{group}_{topic}`` with reconsume times + 1, which later pops read (one pop in five
  looks there first).
- FIFO groups: the offset moves only over acked messages, and a queue with messages in flight
  is skipped, so one queue, hence one message group, is consumed in order one batch at a time.
  When the deadline passes, the same messages are popped again, with the attempt counted.

State that must survive a crash lives in the CommitLog, in the system topic
``rmq_sys_REVIVE_LOG_{cluster}``: a checkpoint record (tag ``ck``) per pop of one queue and an
ack record (tag ``ack``) per ack, change of invisible time or revive, with RocketMQ's JSON
field names. On start the log is replayed from the oldest checkpoint still in flight (kept as
the offset of ``CID_RMQ_SYS_REVIVE_GROUP``), which rebuilds deadlines, FIFO attempts and
offsets. Checkpoints are stored like messages (waiting for the flush under SYNC_FLUSH), so an
in-flight message survives whatever its message would; a lost ack only means a redelivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, decode_message
from pocketmq.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
)
from pocketmq.store import MessageStore
from pocketmq.store.filter import TagFilter
from pocketmq.store.results import GetStatus, PutResult
from pocketmq.tasks import cancel_and_wait

log = logging.getLogger(__name__)

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
# The share of pops that look in the retry topic first (popFromRetryProbability, percent).
POP_FROM_RETRY_PROBABILITY = 20
# A revive whose put fails (disk full, store closing) is tried again after this.
RETRY_AFTER_FAILURE_MS = 1_000
# A message within this many CommitLog bytes of its end is "in memory" (4.x's
# accessMessageInMemoryMaxRatio, 40% of physical memory): a new group of a queue whose first
# message is that young starts at the beginning.
_IN_MEMORY_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 0.4
_NORMAL, _RETRY = "0", "1"


def pop_retry_topic(group: str, topic: str) -> str:
    """RocketMQ's pop retry topic (KeyBuilder.buildPopRetryTopicV1)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


class InvalidReceiptHandle(RequestError):
    """A receipt handle that is malformed, stale (its message was acked, changed or redelivered
    since) or expired."""

    def __init__(self, remark: str) -> None:
        super().__init__(ResponseCode.NO_MESSAGE, remark)


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """Laid out as RocketMQ's ExtraInfoUtil writes it: ``startOffset popTime invisibleTime
    reviveQid topicType brokerName queueId queueOffset``, space separated."""

    start_offset: int
    pop_time: int
    invisible_ms: int
    retry: bool
    broker_name: str
    queue_id: int
    queue_offset: int

    def encode(self) -> str:
        return " ".join(
            (
                str(self.start_offset), str(self.pop_time), str(self.invisible_ms), "0",
                _RETRY if self.retry else _NORMAL, self.broker_name, str(self.queue_id),
                str(self.queue_offset),
            )
        )  # fmt: skip

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ")
        if len(parts) != 8 or parts[4] not in (_NORMAL, _RETRY):
            raise InvalidReceiptHandle(f"receipt handle {text!r} is malformed")
        try:
            return cls(
                int(parts[0]), int(parts[1]), int(parts[2]), parts[4] == _RETRY, parts[5],
                int(parts[6]), int(parts[7]),
            )  # fmt: skip
        except ValueError:
            raise InvalidReceiptHandle(f"receipt handle {text!r} is malformed") from None

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms


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
    tags: TagFilter | None
    tag_set: frozenset[str] | None  # None matches every tag
    fifo: bool
    max_attempts: int


# (group, topic popped from, queue id, queue offset)
Key = tuple[str, str, int, int]
QueueKey = tuple[str, str, int]


@dataclass(slots=True)
class InFlight:
    pop_time: int
    deadline: int
    ck_offset: int  # where its checkpoint record is in the revive queue
    reconsume: int  # deliveries before this one
    fifo: bool
    subscribed: str  # the topic the consumer asked for


@dataclass(slots=True)
class _FifoQueue:
    """What a FIFO group has done past its committed offset in one queue."""

    done: set[int] = field(default_factory=set)  # acked, dead-lettered or filtered out
    attempts: dict[int, int] = field(default_factory=dict)  # deliveries so far


class PopService:
    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        topics: TopicConfigManager,
        cluster: str,
        broker_name: str,
        max_attempts_of: Callable[[str], int],
    ) -> None:
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.broker_name = broker_name
        self.revive_topic = REVIVE_TOPIC_PREFIX + cluster
        self._max_attempts_of = max_attempts_of
        self.inflight: dict[Key, InFlight] = {}
        self._fifo: dict[QueueKey, _FifoQueue] = {}
        self._deadlines: list[tuple[int, Key, int]] = []
        self._turn = 0
        # Pops waiting for a message to arrive in a topic, or a FIFO queue to unblock.
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._wake_reviver = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
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
        for (group, topic, queue_id), _ in list(self._fifo.items()):
            self._advance_fifo(group, topic, queue_id)
        if records:
            log.info("pop state replayed: %d records, %d in flight", records, len(self.inflight))

    def _replay(self, rec: MessageExt, revive_offset: int) -> None:
        try:
            data = orjson.loads(rec.body)
            if rec.tags == CK_TAG:
                self._replay_ck(data, revive_offset)
            elif rec.tags == ACK_TAG:
                key = (data["c"], data["t"], int(data["q"]), int(data["ao"]))
                entry = self.inflight.get(key)
                if entry is not None and entry.pop_time == int(data["pt"]):
                    self._resolve(key, entry)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            log.error("revive record %d is unreadable, skipped: %s", revive_offset, exc)

    def _replay_ck(self, ck: dict[str, Any], revive_offset: int) -> None:
        group, topic, queue_id = str(ck["c"]), str(ck["t"]), int(ck["q"])
        start, pop_time, invisible = int(ck["so"]), int(ck["pt"]), int(ck["it"])
        offsets = [start + int(d) for d in ck["d"]]
        reconsumes = [int(r) for r in ck.get("rt") or [0] * len(offsets)]
        fifo = bool(ck.get("o"))
        subscribed = str(ck.get("st") or topic)
        for offset, reconsume in zip(offsets, reconsumes, strict=True):
            entry = InFlight(
                pop_time, pop_time + invisible, revive_offset, reconsume, fifo, subscribed
            )
            self._add((group, topic, queue_id, offset), entry)
        next_begin = int(ck["nb"])
        if fifo:
            state = self._fifo.setdefault((group, topic, queue_id), _FifoQueue())
            for offset, reconsume in zip(offsets, reconsumes, strict=True):
                state.attempts[offset] = reconsume + 1
            # Offsets of the popped range that were not delivered were filtered out.
            committed = self.offsets.query(group, topic, queue_id)
            state.done.update(set(range(max(start, committed), next_begin)) - set(offsets))
        elif next_begin > self.offsets.query(group, topic, queue_id):
            self.offsets.commit(group, topic, queue_id, next_begin)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._revive_loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self.persist()
        for topic in list(self._waiters):
            self._notify(topic)

    def persist(self) -> None:
        """Move the replay start up to the oldest checkpoint still in flight (the offsets
        file itself is written by the broker)."""
        # A checkpoint still being stored (offset -1) lands at or past the queue's end.
        oldest = min(
            (e.ck_offset for e in self.inflight.values() if e.ck_offset >= 0), default=None
        )
        if oldest is None:
            oldest = self.store.get_max_offset_in_queue(self.revive_topic, 0)
        self.offsets.commit(REVIVE_GROUP, self.revive_topic, 0, oldest)

    def on_message_arrived(self, topic: str, queue_id: int, queue_offset: int) -> None:
        self._notify(topic)

    def _notify(self, topic: str) -> None:
        for fut in self._waiters.pop(topic, ()):
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ in-flight table

    def _add(self, key: Key, entry: InFlight) -> None:
        self.inflight[key] = entry
        heapq.heappush(self._deadlines, (entry.deadline, key, entry.pop_time))
        if self._deadlines[0][1] == key:
            self._wake_reviver.set()

    def _resolve(self, key: Key, entry: InFlight) -> None:
        """The message is done with in the group: acked, dead-lettered or revived."""
        del self.inflight[key]
        if entry.fifo:
            group, topic, queue_id, offset = key
            state = self._fifo.setdefault((group, topic, queue_id), _FifoQueue())
            state.done.add(offset)
            self._advance_fifo(group, topic, queue_id)
            self._notify(topic)

    def _advance_fifo(self, group: str, topic: str, queue_id: int) -> None:
        state = self._fifo.get((group, topic, queue_id))
        if state is None:
            return
        committed = self.offsets.query(group, topic, queue_id)
        start = committed
        while committed in state.done:
            state.done.discard(committed)
            state.attempts.pop(committed, None)
            committed += 1
        if committed != start:
            self.offsets.commit(group, topic, queue_id, committed)

    def _blocked(self, group: str, topic: str, queue_id: int, now: int) -> bool:
        """A FIFO queue with a message still invisible: nothing after it may be delivered."""
        state = self._fifo.get((group, topic, queue_id))
        if state is None or not state.attempts:
            return False
        return any(
            (entry := self.inflight.get((group, topic, queue_id, offset))) is not None
            and entry.deadline > now
            for offset in state.attempts
        )

    def _entry(self, group: str, handle: ReceiptHandle, topic: str) -> tuple[Key, InFlight]:
        real = pop_retry_topic(group, topic) if handle.retry else topic
        key = (group, real, handle.queue_id, handle.queue_offset)
        entry = self.inflight.get(key)
        if entry is None or entry.pop_time != handle.pop_time:
            raise InvalidReceiptHandle(
                "the receipt handle is stale: the message was acked, or its invisible time "
                "changed or ran out since"
            )
        if entry.deadline <= _now():
            raise InvalidReceiptHandle("the receipt handle has expired")
        return key, entry

    # ------------------------------------------------------------------ pop

    async def pop(self, req: PopRequest, poll_ms: int) -> list[Popped]:
        """Up to ``max_nums`` messages, waiting up to ``poll_ms`` for the first one."""
        deadline = time.monotonic() + poll_ms / 1000
        topics = (req.topic, pop_retry_topic(req.group, req.topic))
        while True:
            # Registered before looking, so that an arrival during the look is not missed.
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for topic in topics:
                self._waiters.setdefault(topic, set()).add(fut)
            try:
                found = await self._pop_once(req)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    return found
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(fut, remaining)
            finally:
                for topic in topics:
                    waiting = self._waiters.get(topic)
                    if waiting is not None:
                        waiting.discard(fut)
                        if not waiting:
                            del self._waiters[topic]

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
        dead: list[tuple[MessageExt, Key, InFlight | None]] = []
        for topic, queue_id in sources:
            if len(popped) >= req.max_nums:
                break
            got = self._pop_queue(req, topic, queue_id, pop_time, req.max_nums - len(popped), dead)
            if got:
                popped += got
                batches.append((self._ck_record(req, topic, queue_id, pop_time, got), got))
        for msg, key, entry in dead:
            await self._dead_letter(req.group, msg, key, entry)
        if batches:
            result = await self.store.put_messages([ck for ck, _ in batches])
            if not result.ok:
                # Not delivered; the messages stay in flight and come back at their deadline.
                log.error("pop checkpoint not stored (%s): %s", result.status.value, result.detail)
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"pop failed: {result.detail}")
            for i, (_, got) in enumerate(batches):
                for p in got:
                    key = (req.group, p.msg.topic, p.msg.queue_id, p.msg.queue_offset)
                    self.inflight[key].ck_offset = result.queue_offset + i
        return popped

    def _pop_time(self) -> int:
        # Strictly increasing: a handle is told from the one it replaced by its pop time.
        self._last_pop_time = max(_now(), self._last_pop_time + 1)
        return self._last_pop_time

    def _init_offset(self, topic: str, queue_id: int) -> int:
        """Where a group new to a queue starts (PopMessageProcessor.getInitOffset): a retry
        topic at its start; a queue whose first message is still in memory at its start;
        otherwise at its last message."""
        min_offset = self.store.get_min_offset_in_queue(topic, queue_id)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
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
        dead: list[tuple[MessageExt, Key, InFlight | None]],
    ) -> list[Popped]:
        group = req.group
        if req.fifo and self._blocked(group, topic, queue_id, pop_time):
            return []
        offset = self.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self._init_offset(topic, queue_id)
            self.offsets.commit(group, topic, queue_id, offset)
        state = self._fifo.setdefault((group, topic, queue_id), _FifoQueue()) if req.fifo else None
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
                old = self.inflight.get(key)
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

    def _ck_record(
        self, req: PopRequest, topic: str, queue_id: int, pop_time: int, got: list[Popped]
    ) -> MessageExt:
        start = got[0].msg.queue_offset
        next_begin = (
            self.offsets.query(req.group, topic, queue_id)
            if not req.fifo
            else got[-1].msg.queue_offset + 1
        )
        ck = {
            "so": start,
            "pt": pop_time,
            "it": req.invisible_ms,
            "bm": 0,
            "n": len(got),
            "q": queue_id,
            "t": topic,
            "c": req.group,
            "ro": 0,
            "d": [p.msg.queue_offset - start for p in got],
            "bn": self.broker_name,
            # Ours: the offset past the popped range, reconsume times, FIFO, subscribed topic.
            "nb": next_begin,
            "rt": [p.attempt - 1 for p in got],
            "o": req.fifo,
            "st": req.topic,
        }
        return self._record(CK_TAG, ck, wait=True)

    def _record(self, tag: str, data: dict[str, object], *, wait: bool) -> MessageExt:
        props = {MessageConst.TAGS: tag}
        if not wait:
            props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        return MessageExt(
            topic=self.revive_topic,
            body=orjson.dumps(data),
            queue_id=0,
            properties=props,
            born_timestamp=_now(),
            store_host=self.store.commitlog.store_host,
        )

    def _ack_record(self, key: Key, entry: InFlight) -> MessageExt:
        group, topic, queue_id, offset = key
        return self._record(
            ACK_TAG,
            {"ao": offset, "so": offset, "c": group, "t": topic, "q": queue_id,
             "pt": entry.pop_time, "bn": self.broker_name},
            wait=False,
        )  # fmt: skip

    # ------------------------------------------------------------------ ack, change, DLQ

    async def ack(self, group: str, topic: str, handle_text: str) -> None:
        """Raises:
        InvalidReceiptHandle: a malformed, stale or expired handle."""
        key, entry = self._entry(group, ReceiptHandle.decode(handle_text), topic)
        self._resolve(key, entry)
        await self._put_log([self._ack_record(key, entry)])

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
        ck = {
            "so": handle.queue_offset, "pt": pop_time, "it": invisible_ms, "bm": 0, "n": 1,
            "q": key[2], "t": key[1], "c": group, "ro": 0, "d": [0], "bn": self.broker_name,
            "nb": handle.queue_offset + 1, "rt": [entry.reconsume], "o": entry.fifo,
            "st": entry.subscribed,
        }  # fmt: skip
        records = [self._record(CK_TAG, ck, wait=True), self._ack_record(key, entry)]
        result = await self._put_log(records)
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
        msg = self._look(key)
        if msg is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"message {key} is no longer stored")
        await self._dead_letter(group, msg, key, entry)

    async def _dead_letter(
        self, group: str, msg: MessageExt, key: Key, entry: InFlight | None
    ) -> None:
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        self.topics.create_system_if_absent(dlq, 1, PERM_READ | PERM_WRITE)
        copy = _copy(msg, dlq, 0, msg.reconsume_times)
        result = await self.store.put_messages([copy])
        if not result.ok:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"dead-letter put failed: {result.detail}"
            )
        log.info("message %s of %s dead-lettered to %s", msg.uniq_key, key[1], dlq)
        if entry is not None:
            self._resolve(key, entry)
            await self._put_log([self._ack_record(key, entry)])

    async def _put_log(self, records: list[MessageExt]) -> PutResult:
        result = await self.store.put_messages(records)
        if not result.ok:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"revive log put failed: {result.detail}")
        return result

    def _look(self, key: Key) -> MessageExt | None:
        _, topic, queue_id, offset = key
        phy = self.store.get_commit_log_offset_in_queue(topic, queue_id, offset)
        return self.store.look_message_by_offset(phy) if phy >= 0 else None

    # ------------------------------------------------------------------ revive

    async def _revive_loop(self) -> None:
        while True:
            self._wake_reviver.clear()
            wait_ms = await self._revive_due()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if wait_ms is None else wait_ms / 1000):
                    await self._wake_reviver.wait()

    async def _revive_due(self) -> int | None:
        """Revive what is due; returns ms until the next deadline (None: nothing pending)."""
        while self._deadlines:
            deadline, key, pop_time = self._deadlines[0]
            now = _now()
            if deadline > now:
                return deadline - now
            heapq.heappop(self._deadlines)
            entry = self.inflight.get(key)
            if entry is None or entry.pop_time != pop_time:
                continue  # acked or changed since
            if entry.fifo:
                self._notify(key[1])  # the queue is unblocked; the next pop redelivers
                continue
            try:
                await self._revive(key, entry)
            except RequestError as exc:
                log.error("revive of %s failed, retried: %s", key, exc.remark)
                entry.deadline = _now() + RETRY_AFTER_FAILURE_MS
                heapq.heappush(self._deadlines, (entry.deadline, key, pop_time))
        return None

    async def _revive(self, key: Key, entry: InFlight) -> None:
        """An unacked message of a concurrent group: into the retry topic for another
        delivery, or into the DLQ once the group's deliveries are spent."""
        group = key[0]
        msg = self._look(key)
        if msg is None:
            log.warning("in-flight message %s is no longer stored; dropped", key)
            self._resolve(key, entry)
            return
        if entry.reconsume + 1 >= self._max_attempts_of(group):
            await self._dead_letter(group, msg, key, entry)
            return
        retry = pop_retry_topic(group, entry.subscribed)
        self.topics.create_system_if_absent(retry, 1, PERM_READ | PERM_WRITE)
        copy = _copy(msg, retry, 0, entry.reconsume + 1)
        copy.properties.setdefault(MessageConst.RETRY_TOPIC, entry.subscribed)
        result = await self.store.put_messages([copy])
        if not result.ok:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"revive put failed: {result.detail}")
        self._resolve(key, entry)
        await self._put_log([self._ack_record(key, entry)])


def _copy(msg: MessageExt, topic: str, queue_id: int, reconsume_times: int) -> MessageExt:
    props = dict(msg.properties)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.uniq_key or msg.msg_id)
    return msg.put_again(topic, queue_id, props, reconsume_times)


def _rotate(items: range, turn: int) -> list[int]:
    if not items:
        return []
    start = turn % len(items)
    return list(items[start:]) + list(items[:start])


def _now() -> int:
    return int(time.time() * 1000)
