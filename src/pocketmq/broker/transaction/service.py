"""Transactional messages (RocketMQ's TransactionalMessageServiceImpl, EndTransactionProcessor
and TransactionalMessageCheckService), under both protocol edges.

- ``prepare`` stores a producer's message as a half in ``RMQ_SYS_TRANS_HALF_TOPIC``, where no
  consumer reads (``half.py`` has the transforms).
- ``end`` resolves a transaction once: a commit appends the real message (visible from then
  on) and the op record that resolves the half as ONE store append, commit first; a rollback
  appends the op alone. The store writes an append all or nothing (the first record's size
  goes in last), so a killed broker never keeps a commit without its op; only a page torn by
  a power cut could, and then the half is checked again. A transaction already resolved, by
  either end or by the check giving up, is refused: a commit after a rollback (or the
  reverse) is never applied, and a second commit never puts the message twice (it is answered
  as done while the broker still knows how the transaction ended). Nothing awaits
  between the lookup of the transaction and the append, so two ends of one half are
  serialized by the event loop.
- ``check_round`` (every ``transactionCheckInterval``) asks a live producer of the half's
  group (``PGROUP``) about each open transaction older than ``transactionTimeOut``, or than
  its ``CHECK_IMMUNITY_TIME_IN_SECONDS``. Each check first puts the half back at the end of
  the half queue with ``TRANSACTION_CHECK_TIMES`` counted, as RocketMQ does, so the count is
  durable; a check without a live producer counts too (RocketMQ's listener just logs that the
  channel is null). A half checked ``transactionCheckMax`` times is rolled back: its op is
  written, a copy kept in ``TRANS_CHECK_MAX_TIME_TOPIC`` (as RocketMQ keeps it), and a
  WARNING logged. A half still inside its immunity time is put back uncounted, so that it
  does not hold back the progress.

What survives a SIGKILL: every half, copy and op is a record of the CommitLog. The progress
is kept as the consumer offsets of ``CID_RMQ_SYS_TRANS`` in the half and op queues, persisted
with every other offset: halves before the half progress are resolved or superseded by a
later copy, and the ops from the op progress on cover every half after the half progress
(an op is passed only once the half progress is past every half that existed when it was
written). ``load`` reads both queues from there: open transactions are checked again,
resolved ones are not, and a committed one cannot be committed twice.

Every copy of a half carries the queue offset of the first half (TRAN_PREPARED_QUEUE_OFFSET),
which identifies the transaction: an END_TRANSACTION naming the first half or any copy of it
resolves the same transaction, and each op lists the offsets it resolves.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.status_map import PUT_STATUS_CODES
from pocketmq.broker.transaction import half as tx
from pocketmq.broker.transaction.producers import CheckRequest, ProducerRegistry
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, delay_property
from pocketmq.protocol.names import (
    PERM_READ_WRITE,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_GROUP,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore, PutResult, PutStatus
from pocketmq.tasks import cancel_and_wait, run_when_due

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.offsets import ConsumerOffsetManager
    from pocketmq.broker.topics import TopicConfigManager

log = logging.getLogger(__name__)

COMMIT = SysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = SysFlag.TRANSACTION_ROLLBACK_TYPE
UNKNOWN = SysFlag.TRANSACTION_NOT_TYPE
_OUTCOME = {COMMIT: "committed", ROLLBACK: "rolled back"}
# Put outcomes after which the records are written, if not yet durable (sendFinalMessage).
_WRITTEN = (
    PutStatus.PUT_OK,
    PutStatus.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE,
)
# Records read per store call while loading.
_READ_BATCH = 256
# Open transactions a check round handles before it lets other work run on the loop.
_YIELD_EVERY = 128


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """A producer's end of a transaction (END_TRANSACTION, or a 5.x EndTransaction).

    ``producer_group`` and ``queue_offset`` (tranStateTableOffset) are checked against the
    half when given; ``resolution`` is SysFlag's COMMIT, ROLLBACK or NOT_TYPE (unknown:
    nothing happens, the half is checked later).
    """

    producer_group: str | None
    commit_log_offset: int
    queue_offset: int | None
    resolution: int
    from_check: bool
    msg_id: str


@dataclass(frozen=True, slots=True)
class _Open:
    """The latest half (the first or a copy) of an open transaction."""

    first: int  # queue offset of the first half: the transaction
    queue_offset: int
    phy_offset: int
    store_ms: int
    born_ms: int


@dataclass(frozen=True, slots=True)
class _Op:
    queue_offset: int
    # The half queue's end when the op was written: every half of its transaction is before.
    horizon: int
    first: int | None


class TransactionService:
    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        topics: TopicConfigManager,
        producers: ProducerRegistry,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store, self.offsets, self.topics = store, offsets, topics
        self.producers, self.config, self.clock = producers, config, clock
        # first half's queue offset -> the latest half of that open transaction
        self.open: dict[int, _Open] = {}
        # How transactions resolved in this run ended, while their ops are not yet passed.
        self._outcomes: dict[int, int] = {}
        self._ops: deque[_Op] = deque()
        self._half_end = 0  # next queue offset of the half queue
        self._op_end = 0  # next queue offset of the op queue
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def store_host(self) -> tuple[str, int]:
        return self.store.commitlog.store_host

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Rebuild the open transactions from the progress on (after the store opened and
        the offsets loaded)."""
        self._half_end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        self._op_end = self.store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        resolved: set[int] = set()
        for queue_offset, op in self._read(TRANS_OP_HALF_TOPIC):
            if op.tags == tx.REMOVE_TAG:
                resolved.update(tx.parse_op_body(op.body))
            else:
                log.error("op record %d has tag %r, not %r: ignored", queue_offset, op.tags,
                          tx.REMOVE_TAG)  # fmt: skip
            self._ops.append(_Op(queue_offset, self._half_end, None))
        for queue_offset, stored in self._read(TRANS_HALF_TOPIC):
            first = tx.first_half_offset(stored)
            if first in resolved or queue_offset in resolved:
                resolved.add(first)
                self.open.pop(first, None)
            else:
                self.open[first] = _Open(first, queue_offset, stored.phy_offset,
                                         stored.store_timestamp, stored.born_timestamp)  # fmt: skip
        if self.open:
            log.info("%d open transactions to check", len(self.open))

    def _read(self, topic: str) -> Iterator[tuple[int, MessageExt]]:
        """The records of a transaction queue from its progress on."""
        offset = self.offsets.query(TRANS_GROUP, topic, 0)
        low = self.store.get_min_offset_in_queue(topic, 0)
        offset = min(max(offset, low), self.store.get_max_offset_in_queue(topic, 0))
        while True:
            result = self.store.get_message(topic, 0, offset, _READ_BATCH)
            for queue_offset, raw in zip(result.queue_offsets, result.messages, strict=True):
                yield queue_offset, decode_message(raw)
            # Found, or records removed by retention: go on; the end or no queue: done.
            if result.next_begin_offset <= offset:
                return
            offset = result.next_begin_offset

    async def start(self) -> None:
        """Check every ``transactionCheckInterval``, the first time one interval from now
        (TransactionalMessageCheckService waits first), so that producers reconnecting after
        a restart are there before the first check counts."""

        async def loop() -> None:
            await asyncio.sleep(self.config.transaction_check_interval / 1000)
            await run_when_due(self.check_round, self._wake)

        self._task = asyncio.create_task(loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        self.save_progress()

    def save_progress(self) -> None:
        """Note the check's progress as CID_RMQ_SYS_TRANS's offsets (persisted with the
        others): the oldest open half, and the oldest op still needed to know that a half
        after it is resolved."""
        if self._half_end == 0:
            return  # no half was ever stored: nothing to note
        progress = min((o.queue_offset for o in self.open.values()), default=self._half_end)
        while self._ops and self._ops[0].horizon <= progress:
            done = self._ops.popleft()
            if done.first is not None:
                self._outcomes.pop(done.first, None)
        op_progress = self._ops[0].queue_offset if self._ops else self._op_end
        self.offsets.commit(TRANS_GROUP, TRANS_HALF_TOPIC, 0, progress)
        self.offsets.commit(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0, op_progress)

    # ------------------------------------------------------------------ prepare

    async def prepare(self, msg: MessageExt) -> PutResult:
        """Store a producer's transactional message as a half: not visible until committed.
        The result's queue offset and offset message id are what its END_TRANSACTION names.

        Raises:
            RequestError: NO_PERMISSION under rejectTransactionMessage; MESSAGE_ILLEGAL for a
                half without its producer group (no check could reach it) or with a delay
                or timer property.
        """
        if self.config.reject_transaction_message:
            raise RequestError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden",
            )
        if not msg.properties.get(MessageConst.PRODUCER_GROUP):
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                "a transactional message must carry its producer group in property PGROUP",
            )
        timed = delay_property(msg.properties)
        if timed is not None:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"a transactional message cannot be delayed (property {timed}); send it "
                "without the delay, as RocketMQ's producers do",
            )
        for topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
            self.topics.create_system_if_absent(topic, 1, PERM_READ_WRITE)
        stored = tx.half_of(msg)
        result = self.store.append([stored])
        if result.ok:
            first = result.queue_offset
            self.open[first] = _Open(
                first, first, result.phy_offset, result.store_timestamp, stored.born_timestamp
            )
            self._half_end = first + 1
        return await self.store.flushed(result, [stored])

    # ------------------------------------------------------------------ end

    async def end(self, end: EndTransaction) -> None:
        """Commit or roll back the transaction of the half at ``end.commit_log_offset``.

        Raises:
            RequestError: SYSTEM_ERROR with RocketMQ's remarks for an offset with no half,
                another producer group or another queue offset;
                ILLEGAL_OPERATION for a transaction already resolved, or ended by the producer
                after its immunity time (it waits for the check, as RocketMQ's
                rejectCommitOrRollback); a store failure's code.
        """
        if end.resolution not in (COMMIT, ROLLBACK):
            if end.resolution != UNKNOWN:
                raise RequestError(ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong")
            log.warning("producer answered unknown (UNKNOW) for message %s (commitLogOffset "
                        "%d, from check: %s): it stays open", end.msg_id, end.commit_log_offset,
                        end.from_check)  # fmt: skip
            return
        stored = self._half_at(end)
        first = tx.first_half_offset(stored)
        current = self.open.get(first)
        verb = "commit" if end.resolution == COMMIT else "rollback"
        if current is None:
            resolved_as = self._outcomes.get(first, UNKNOWN)
            if resolved_as == end.resolution:
                # The same answer twice (a producer's own end racing its check-back, a
                # retried send): nothing more to do, and nothing for the producer to fix.
                log.info("%s of message %s: already done", verb, end.msg_id)
                return
            outcome = _OUTCOME.get(resolved_as, "resolved")
            log.warning("%s of message %s (half at commitLogOffset %d) refused: its "
                        "transaction is already %s", verb, end.msg_id, end.commit_log_offset,
                        outcome)  # fmt: skip
            raise RequestError(
                ResponseCode.ILLEGAL_OPERATION,
                f"the transaction of message {end.msg_id} is already {outcome}: this {verb} "
                "is not applied",
            )
        if self._past_immunity(end, stored):
            log.warning("%s of message %s refused: past its check immunity time, it waits for "
                        "the check", verb, end.msg_id)  # fmt: skip
            raise RequestError(
                ResponseCode.ILLEGAL_OPERATION,
                f"the {verb} of message {end.msg_id} comes after its check immunity time: "
                "the broker will check the transaction",
            )
        op = self._op(stored, current)
        records = [tx.committed(stored, self.store_host), op] if end.resolution == COMMIT else [op]
        result = self.store.append(records)
        if result.ok:
            self._resolved(first, end.resolution)
        result = await self.store.flushed(result, records)
        if result.status not in _WRITTEN:
            code, remark = PUT_STATUS_CODES[result.status]
            raise RequestError(code, f"{remark} {result.detail}".strip())

    def _half_at(self, end: EndTransaction) -> MessageExt:
        """The half an end names, checked as EndTransactionProcessor.checkPrepareMessage does.

        Raises:
            RequestError: SYSTEM_ERROR with RocketMQ's remarks.
        """
        stored = self.store.look_message_by_offset(end.commit_log_offset)
        if stored is None or stored.topic != TRANS_HALF_TOPIC:
            what = "no message" if stored is None else f"a message of topic {stored.topic}"
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"Find prepared transaction message failed: commitLogOffset "
                f"{end.commit_log_offset} holds {what}",
            )
        group = stored.properties.get(MessageConst.PRODUCER_GROUP)
        if end.producer_group is not None and group != end.producer_group:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if end.queue_offset is not None and stored.queue_offset != end.queue_offset:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
            )
        return stored

    def _past_immunity(self, end: EndTransaction, stored: MessageExt) -> bool:
        if end.from_check:
            return False
        immunity = tx.immunity_ms(stored, self.config.transaction_time_out)
        return immunity is not None and self.clock.now_ms() - stored.born_timestamp > immunity

    def _op(self, stored: MessageExt, current: _Open) -> MessageExt:
        """The op resolving ``stored``'s transaction: it lists the half named, the latest copy
        and the first half, so that any reader of the op queue sees all three resolved."""
        offsets = (stored.queue_offset, current.queue_offset, current.first)
        return tx.op_message(offsets, stored.queue_id, self.store_host, self.clock.now_ms())

    def _resolved(self, first: int, resolution: int) -> None:
        """Note a transaction resolved (its op was just appended)."""
        del self.open[first]
        self._outcomes[first] = resolution
        self._ops.append(_Op(self._op_end, self._half_end, first))
        self._op_end += 1

    # ------------------------------------------------------------------ check-back

    async def check_round(self) -> int:
        """Check every open transaction that is due; returns when the next round is due
        (ms), for ``tasks.run_when_due``."""
        now = self.clock.now_ms()
        timeout = self.config.transaction_time_out
        for n, current in enumerate(sorted(self.open.values(), key=lambda o: o.queue_offset)):
            if n % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)  # let requests in between; ends may resolve some
            # Skipped: a transaction resolved meanwhile, a half stored during this round, and
            # one younger than the timeout (no immunity is shorter: nothing is due yet).
            if self.open.get(current.first) is not current or current.store_ms >= now:
                continue
            if 0 <= now - current.born_ms <= timeout:
                continue
            self._check(current, now)
        self.save_progress()
        return self.config.transaction_check_interval

    def _check(self, current: _Open, now: int) -> None:
        stored = self.store.look_message_by_offset(current.phy_offset)
        if stored is None or stored.topic != TRANS_HALF_TOPIC:
            log.error("the half message at commitLogOffset %d is gone (retention): its "
                      "transaction is dropped", current.phy_offset)  # fmt: skip
            del self.open[current.first]
            return
        timeout = self.config.transaction_time_out
        age = now - stored.born_timestamp
        times = tx.check_times(stored)
        if times is not None and times >= self.config.transaction_check_max:
            self._give_up(stored, current, f"no answer after {times} checks")
            return
        if age > self.config.store.file_reserved_time * 3_600_000:
            self._give_up(stored, current, "older than the file reserved time")
            return
        immunity = tx.immunity_ms(stored, timeout)
        if immunity is not None and age <= immunity:
            # Put back uncounted (RocketMQ counts these, which can give up on a half with a
            # long immunity before it was ever checked), so the progress can move on.
            if age > timeout:
                self._put_back(stored, current, checked=None)
            return
        copy = self._put_back(stored, current, checked=(times or 0) + 1)
        if copy is not None:
            self._ask(copy)

    def _put_back(
        self, stored: MessageExt, current: _Open, checked: int | None
    ) -> MessageExt | None:
        copy = tx.copy_of(stored, checked=checked)
        copy.store_host = self.store_host
        result = self.store.append([copy])
        if not result.ok:
            log.error("cannot put back the half of message %s: %s %s", stored.uniq_key,
                      result.status.name, result.detail)  # fmt: skip
            return None
        copy.queue_offset, copy.phy_offset = result.queue_offset, result.phy_offset
        copy.msg_id, copy.store_timestamp = result.msg_id, result.store_timestamp
        self.open[current.first] = _Open(current.first, result.queue_offset, result.phy_offset,
                                         result.store_timestamp, current.born_ms)  # fmt: skip
        self._half_end = result.queue_offset + 1
        return copy

    def _ask(self, copy: MessageExt) -> None:
        group = copy.properties.get(MessageConst.PRODUCER_GROUP, "")
        uniq = copy.uniq_key or ""
        checker = self.producers.pick(group)
        if checker is None:
            log.warning("cannot check the transaction of message %s (topic %s): no live "
                        "producer of group %s", uniq, tx.real_topic(copy), group)  # fmt: skip
            return
        request = CheckRequest(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.phy_offset,
            msg_id=uniq,
            offset_msg_id=copy.msg_id,
            transaction_id=uniq,
            topic=TRANS_HALF_TOPIC,
        )
        try:
            checker.check(tx.as_sent(copy), request)
        except Exception:  # one producer's failure must not stop the round
            log.exception("checking the transaction of message %s with group %s failed",
                          uniq, group)  # fmt: skip

    def _give_up(self, stored: MessageExt, current: _Open, why: str) -> None:
        """Roll back a transaction the producers never resolved, keeping the message in
        TRANS_CHECK_MAX_TIME_TOPIC as RocketMQ does."""
        self.topics.create_system_if_absent(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ_WRITE)
        kept = tx.checked_too_often(stored)
        kept.store_host = self.store_host
        result = self.store.append([kept, self._op(stored, current)])
        if not result.ok:
            log.error("cannot roll back the transaction of message %s: %s %s",
                      stored.uniq_key, result.status.name, result.detail)  # fmt: skip
            return
        self._resolved(current.first, ROLLBACK)
        log.warning(
            "transaction rolled back by the broker (%s): topic %s, msg id %s, producer group "
            "%s; the message is kept in %s",
            why, tx.real_topic(stored), stored.uniq_key or stored.msg_id,
            stored.properties.get(MessageConst.PRODUCER_GROUP), TRANS_CHECK_MAX_TIME_TOPIC,
        )  # fmt: skip
