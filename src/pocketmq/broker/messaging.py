"""The protocol-neutral messaging service: every RocketMQ rule a client request meets, written
once, under both edges. Remoting handlers (``broker/handlers/``) and the gRPC servicer
(``grpc/``) parse a request, call this service and map the result, as RocketMQ's
proxy hands its gRPC activities to ``MessagingProcessor``.

- Send: topic resolution (auto-creation from ``TBW102``, retry topics), the broker's and the
  topic's permissions, the dead-letter rule of sends to a retry topic, timer and delay-level
  parking, the properties the broker stamps on every message (cluster, region, trace
  switch), then the store; transactional half messages to ``broker/transaction``.
- Retry and dead letters: one implementation for 4.x send-back, direct retry sends and POP
  revives (``redeliver``), with one rule for when a message's retries are spent.
- Pull, subscriptions, offsets, consumer groups and queue locks: the consuming half,
  ``broker/consuming.py``, which this class extends.
- The role and the checks every request meets first (a slave refuses every write with
  ``check_master``, serves reads and tells pulls which broker to read from next):
  ``broker/messaging_core.py``, the base of both halves.

Refusals are ``RequestError`` values with RocketMQ's remoting code and remark; each edge maps
them to its protocol. Each field's syntax (names, Java int and long ranges, polling times) is
checked by the edges with ``protocol.fields`` before they call; what needs the broker's state
(a queue id against its topic's queues) is checked here, with the same validators.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Iterable

from pocketmq.broker.consuming import ConsumingService
from pocketmq.broker.stats import Protocol
from pocketmq.broker.status_map import SLAVE_END_TRANSACTION_REFUSAL
from pocketmq.broker.topics import TopicConfig
from pocketmq.broker.transaction import EndTransaction
from pocketmq.broker.transaction import half as tx
from pocketmq.errors import RequestError
from pocketmq.pending import Pending, outcome_of, pending_of
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import ANY_QUEUE, check_queue_id
from pocketmq.protocol.message import TIMER_PROPERTIES, MessageConst, MessageExt, SysFlag
from pocketmq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    FIRST_RETRY_DELAY_LEVEL,
    PERM_READ_WRITE,
    dlq_topic,
    group_of_retry_topic,
    is_retry_topic,
    is_system_topic,
    is_writeable,
    retry_topic,
)
from pocketmq.protocol.topic_attributes import message_type_of
from pocketmq.store import PutResult

log = logging.getLogger(__name__)

# What the half, timer and delay rules of a send read besides the sys flag's transaction
# bits: a message with none of them (nearly every one) is left alone by all three.
_RULED_PROPERTIES = frozenset(
    (MessageConst.TRANSACTION_PREPARED, MessageConst.DELAY_TIME_LEVEL, *TIMER_PROPERTIES)
)


def _ruled(msg: MessageExt) -> bool:
    """Whether the half, timer or delay rules of a send read ``msg``."""
    return bool(msg.sys_flag & SysFlag.TRANSACTION_ROLLBACK_TYPE) or not (
        msg.properties.keys().isdisjoint(_RULED_PROPERTIES)
    )


def plain_send(msg: MessageExt) -> bool:
    """Whether ``send_now`` would store ``msg`` as it came, but for the stamps: no
    transaction, timer, delay or retry-topic rule applies (nearly every send)."""
    return not _ruled(msg) and not is_retry_topic(msg.topic)


def retries_spent(reconsume_times: int, max_reconsume_times: int) -> bool:
    """Whether a message that failed after ``reconsume_times`` earlier retries goes to the
    dead-letter queue instead of another retry (it has been delivered reconsume_times + 1
    times; ``max_reconsume_times`` retries are allowed)."""
    return reconsume_times >= max_reconsume_times


def _settle_each(deferred: list[tuple[Pending[PutResult], PutResult]]) -> None:
    """Give each deferred send its result; one answer that fails leaves the others answered."""
    for later, result in deferred:
        try:
            later.then(result)
        except Exception:
            log.exception("answering a send failed")


class MessagingService(ConsumingService):
    """The whole service: sends, retries and dead letters here, the rest inherited."""

    # ------------------------------------------------------------------ send

    def topic_for_send(
        self, topic: str, default_topic: str = AUTO_CREATE_TOPIC_KEY, queue_nums: int = 0
    ) -> TopicConfig:
        """The config of a topic a producer sends to, auto-created from ``default_topic``
        with at most ``queue_nums`` queues (the broker's default when 0) when enabled.

        Raises:
            RequestError: the template topic itself, a missing topic, or no write permission.
        """
        self.check_writable()
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system topic."
            )
        if is_system_topic(topic):
            # Only the broker writes these (TopicValidator.isNotAllowedSendTopic).
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        cfg = self.topics.get(topic)
        if cfg is None and is_retry_topic(topic):
            cfg = self.topics.create_system_if_absent(topic, 1, PERM_READ_WRITE)
        if cfg is None and self.config.auto_create_topic_enable:
            cfg = self.topics.create_in_send(
                topic, default_topic, queue_nums or self.config.default_topic_queue_nums
            )
        if cfg is None:
            raise RequestError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not is_writeable(cfg.perm):
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return cfg

    @staticmethod
    def write_queue(cfg: TopicConfig, queue_id: int) -> int:
        """The queue a send goes to: the one it names, or any (ANY_QUEUE) picked at random.

        Raises:
            RequestError: SYSTEM_ERROR for a queue the topic does not have, as RocketMQ says.
        """
        if queue_id == ANY_QUEUE:
            return random.randrange(cfg.write_queue_nums)
        return check_queue_id(
            queue_id, cfg.write_queue_nums, topic=cfg.topic_name, code=ResponseCode.SYSTEM_ERROR
        )

    async def send(
        self, msg: MessageExt, max_reconsume_times: int | None = None,
        protocol: Protocol = Protocol.REMOTING,
    ) -> PutResult:  # fmt: skip
        """Store one message a producer sent (``send_now``), awaited."""
        result = self.send_now(msg, max_reconsume_times, protocol)
        return result if isinstance(result, PutResult) else await outcome_of(result)

    def send_now(
        self, msg: MessageExt, max_reconsume_times: int | None = None,
        protocol: Protocol = Protocol.REMOTING,
    ) -> PutResult | Pending[PutResult]:  # fmt: skip
        """Store one message a producer sent: a send to a retry topic may be dead-lettered
        (past ``max_reconsume_times``, the group's when None, or for an ordered group), timer
        and delay-level messages are parked in their system topics, then the store appends it.
        A stored message counts in its topic's put statistics (the topic it was sent to).

        A transactional half message (PREPARED) goes to the transaction service instead,
        invisible until its producer commits it.

        The result itself when the send may be answered at once (the store's
        ``put_coalesced``), else a Pending of it (or of the exception that ended the send):
        most sends under ASYNC_FLUSH need no coroutine, and those held for a coalesced put no
        task.

        Raises:
            RequestError: an unknown retry group or a bad timer or delay property (a half the
                transaction service refuses ends its Pending).
        """
        topic = msg.topic
        # Before the timer and delay rewrites take the properties that make a delay message.
        message_type = message_type_of(msg.properties)
        # A half carries the stamps too: its commit re-puts it as it was sent.
        self.stamp((msg,))
        ruled = _ruled(msg)
        if ruled:
            if tx.is_half(msg):
                half = self._prepared(msg, topic, protocol, message_type)
                return pending_of(half, self._preparing)
            tx.make_visible(msg)
        if is_retry_topic(msg.topic):
            group = group_of_retry_topic(msg.topic)
            sub = self.group(group)
            max_times = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
            # The client already counted this delivery in the message it sends back.
            spent = retries_spent(msg.reconsume_times - 1, max_times)
            if spent or self.broker.locks.has_live_locks(group):
                self._to_dead_letter(group, msg)
        if ruled:
            self.broker.timer.rewrite(msg)
            self.broker.schedule.rewrite(msg)
        return self._put([msg], topic, protocol, message_type)

    def send_run(
        self, msgs: list[MessageExt], protocol: Protocol = Protocol.REMOTING
    ) -> list[PutResult | Pending[PutResult] | Exception]:
        """Store sends that are all ``plain_send``, each a put of its own, made together (a
        read's sends): what ``send_now`` gives for each, or the exception that ended it, in
        one pass and one append."""
        self.stamp(msgs)
        return self._put_units(
            [[msg] for msg in msgs],
            [(msg.topic, message_type_of(msg.properties)) for msg in msgs],
            protocol,
        )

    def send_batch(self, msgs: list[MessageExt]) -> PutResult | Pending[PutResult]:
        """Store a batch as one append (no delays in a batch: the edge refuses them); answered
        as ``send_now`` is.

        Raises:
            RequestError: MESSAGE_ILLEGAL for a transactional message in the batch, as
                RocketMQ's CommitLog refuses a batch with a transaction type.
        """
        if not tx.all_plain(msgs):
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                "transactional messages cannot be sent in a batch: send each on its own",
            )
        self.stamp(msgs)
        return self._put(
            msgs, msgs[0].topic, Protocol.REMOTING, message_type_of(msgs[0].properties)
        )

    def _put(
        self, msgs: list[MessageExt], topic: str, protocol: Protocol, message_type: str
    ) -> PutResult | Pending[PutResult]:
        """One put of ``_put_units``: its outcome, an exception raised."""
        outcome = self._put_units([msgs], [(topic, message_type)], protocol)[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _put_units(
        self, units: list[list[MessageExt]], counted_as: list[tuple[str, str]], protocol: Protocol
    ) -> list[PutResult | Pending[PutResult] | Exception]:
        """Append producers' puts (the store's ``put_coalesced``), each counted once stored in
        the put statistics of its (topic it was sent to, message type); each answered as
        ``send_now`` is. When they woke consumers parked on their queues (long-polling pulls,
        pops), those answer before the sends do: answering a producer first would put its
        response's write (a loopback write wakes the producer) ahead of every delivery, and
        end-to-end latency is what a parked consumer is there for (BENCHMARKS.md, "Consumers
        first")."""
        woken = self._woken()
        try:
            outcomes = self.store.put_coalesced(units)
        except Exception as exc:  # nothing was appended: every put ends with it
            return [exc] * len(units)
        # Puts stored at once are counted together, one count per topic and type.
        counts: dict[tuple[str, str], list[int]] = {}
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, PutResult):
                if outcome.ok:
                    count = counts.get(counted_as[i])
                    if count is None:
                        counts[counted_as[i]] = [outcome.msg_num, outcome.wrote_bytes, 1]
                    else:
                        count[0] += outcome.msg_num
                        count[1] += outcome.wrote_bytes
                        count[2] += 1
            elif isinstance(outcome, Pending):
                topic, message_type = counted_as[i]
                later: Pending[PutResult] = Pending()
                outcome.then = functools.partial(
                    self._put_done, woken, topic, protocol, message_type, later
                )
                outcomes[i] = later
        try:
            for (topic, message_type), (nums, size, times) in counts.items():
                self.stats.on_put(topic, nums, size, protocol, message_type, times)
        except Exception as exc:  # the sends stored at once end with it, as any send would
            return [exc if isinstance(o, PutResult) else o for o in outcomes]
        if self._woken() != woken:
            deferred: list[tuple[Pending[PutResult], PutResult]] = []
            for i, outcome in enumerate(outcomes):
                if isinstance(outcome, PutResult):
                    after: Pending[PutResult] = Pending()
                    deferred.append((after, outcome))
                    outcomes[i] = after
            if deferred:
                asyncio.get_running_loop().call_soon(_settle_each, deferred)
        return outcomes

    def _put_done(
        self, woken: int, topic: str, protocol: Protocol, message_type: str,
        later: Pending[PutResult], outcome: PutResult | Exception,
    ) -> None:  # fmt: skip
        """A held put's outcome: counted when stored, and given to ``later`` after the
        consumers the put woke. A count that fails ends the send with its exception, as it
        would a send answered at once: no send is left unanswered."""
        if isinstance(outcome, PutResult):
            try:
                self._count(outcome, topic, protocol, message_type)
            except Exception as exc:
                later.then(exc)
                return
            if self._woken() != woken:
                asyncio.get_running_loop().call_soon(later.settle, outcome)
                return
        later.then(outcome)

    def _woken(self) -> int:
        """How many parked consumers (pulls and pops) puts have woken so far."""
        return self.broker.pull_hold.woken + self.broker.pop.woken

    def _count(self, result: PutResult, topic: str, protocol: Protocol, message_type: str) -> None:
        """A producer's stored messages count in their topic's put statistics."""
        if result.ok:
            self.stats.on_put(topic, result.msg_num, result.wrote_bytes, protocol, message_type)

    async def _prepared(
        self, msg: MessageExt, topic: str, protocol: Protocol, message_type: str
    ) -> PutResult:
        """A half message kept by the transaction service (it wakes nobody), counted when
        stored."""
        result = await self.broker.transactions.prepare(msg)
        self._count(result, topic, protocol, message_type)
        return result

    def stamp(self, msgs: Iterable[MessageExt]) -> None:
        """The properties RocketMQ's send processor puts on every message a producer sends:
        the broker's cluster (which a request-reply consumer needs to build its reply), its
        region and trace switch (5.x stamps these on each message, 4.x only in the answer)."""
        stamp = self._stamp
        for msg in msgs:
            msg.properties.update(stamp)

    async def store_reply(self, msg: MessageExt) -> PutResult | None:
        """Keep a reply message (already pushed to its requester, or not) in the reply topic
        as it was sent, when storeReplyMessageEnable; None when it is not kept."""
        if not self.config.store_reply_message_enable:
            return None
        return self._stored(await self.store.put_messages([msg]))

    def _stored(self, result: PutResult) -> PutResult:
        """A put the broker makes for itself counts in the store's totals only."""
        if result.ok:
            self.stats.on_store(result.msg_num, result.wrote_bytes)
        return result

    async def end_transaction(self, end: EndTransaction) -> None:
        """A producer's commit or rollback of a half message (both edges).

        Raises:
            RequestError: SLAVE_NOT_AVAILABLE on a slave, as EndTransactionProcessor answers;
                the transaction service's refusals.
        """
        self.check_master(ResponseCode.SLAVE_NOT_AVAILABLE, SLAVE_END_TRANSACTION_REFUSAL)
        await self.broker.transactions.end(end)

    # ------------------------------------------------------------------ retry and DLQ

    def _to_dead_letter(self, group: str, msg: MessageExt) -> None:
        """Point ``msg`` at the group's dead-letter queue, created on first use."""
        msg.topic = dlq_topic(group)
        msg.queue_id = 0
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        self.topics.create_system_if_absent(msg.topic, 1, PERM_READ_WRITE)

    async def redeliver(
        self,
        group: str,
        origin: MessageExt,
        *,
        original_topic: str,
        reconsume_times: int,
        retry_to: str | None,
        retry_queue_nums: int = 1,
        delay_level: int = 0,
    ) -> PutResult:
        """Store a message a consumer group did not consume once more: in ``retry_to`` for
        another delivery (after ``delay_level`` when not 0), or in the group's dead-letter
        queue when ``retry_to`` is None. The copy keeps the producer's body and born fields,
        the topic it was first sent to (RETRY_TOPIC) and its first message id
        (ORIGIN_MESSAGE_ID), so a consumer or an audit can tell where it came from.
        """
        self.check_master()
        props = dict(origin.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, original_topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = origin.uniq_key or origin.msg_id
        msg = origin.put_again(origin.topic, 0, props, reconsume_times)
        msg.store_host = self.store_host
        if retry_to is None:
            self._to_dead_letter(group, msg)
        else:
            cfg = self.topics.create_system_if_absent(retry_to, retry_queue_nums, PERM_READ_WRITE)
            msg.topic = retry_to
            msg.queue_id = random.randrange(max(cfg.write_queue_nums, 1))
            if delay_level:
                msg.properties[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
                self.broker.schedule.rewrite(msg)
        return self._stored(await self.store.put_messages([msg]))

    async def send_back(
        self, group: str, phy_offset: int, delay_level: int, max_reconsume_times: int | None
    ) -> PutResult | None:
        """A 4.x consumer failed the message at ``phy_offset``: into the group's retry topic
        at delay level 3 + times retried (or the client's level), or into its DLQ once its
        retries are spent or when the client asks with a negative level. None when the group
        wants no retries.

        Raises:
            RequestError: an unknown group, a read-only broker or an offset with no message.
        """
        sub = self.group(group)
        self.check_writable()
        if sub.retry_queue_nums <= 0:
            return None
        origin = self.store.look_message_by_offset(phy_offset)
        if origin is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {phy_offset}"
            )
        max_times = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
        dead = delay_level < 0 or retries_spent(origin.reconsume_times, max_times)
        result = await self.redeliver(
            group,
            origin,
            original_topic=origin.topic,
            reconsume_times=origin.reconsume_times + 1,
            retry_to=None if dead else retry_topic(group),
            retry_queue_nums=sub.retry_queue_nums,
            delay_level=delay_level or FIRST_RETRY_DELAY_LEVEL + origin.reconsume_times,
        )
        if result.ok:
            # Counted under the topic the message was first sent to, as RocketMQ does.
            topic = origin.properties.get(MessageConst.RETRY_TOPIC) or origin.topic
            self.stats.on_send_back(group, topic)
        return result
