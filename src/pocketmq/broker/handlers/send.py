"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
CONSUMER_SEND_MSG_BACK (36): parse, then the messaging service stores (SendMessageProcessor)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pocketmq.broker.messaging import plain_send
from pocketmq.broker.status_map import PUT_STATUS_CODES
from pocketmq.errors import ProtocolError, RequestError
from pocketmq.pending import Pending
from pocketmq.protocol import fields
from pocketmq.protocol.batch import batch_messages
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, host_to_bytes
from pocketmq.protocol.properties import decode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.send_header import send_header, v1_fields
from pocketmq.remoting import RemotingChannel, RequestHandler
from pocketmq.remoting.channel import HandlerResult, RunHandler
from pocketmq.store import PutResult

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker
    from pocketmq.broker.messaging import MessagingService
    from pocketmq.broker.topics import TopicConfig

_BORN_HOST = "born_host"  # the channel attribute caching born_host's answer
_V2_CODES = frozenset(
    {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
)


def born_host(channel: RemotingChannel) -> tuple[str, int]:
    """The producer's address as a record stores it (127.0.0.1:0 when it is not IPv4/6),
    parsed once per connection: every send asks."""
    known: tuple[str, int] | None = channel.attributes.get(_BORN_HOST)
    if known is not None:
        return known
    host, _, port = channel.peer.rpartition(":")
    try:
        host_to_bytes((host.strip("[]"), int(port)))
        known = host.strip("[]"), int(port)
    except ValueError:
        known = "127.0.0.1", 0
    channel.attributes[_BORN_HOST] = known
    return known


def put_response(
    cmd: RemotingCommand, result: PutResult, queue_id: int, region: dict[str, str]
) -> RemotingCommand:
    code, remark = PUT_STATUS_CODES[result.status]
    if result.detail and code != ResponseCode.SUCCESS:
        remark = f"{remark} {result.detail}".strip()
    # A Java producer reads these into SendResult.regionId and traceOn.
    fields = dict(region)
    if result.phy_offsets:
        fields["msgId"] = result.msg_ids_text
        fields["queueId"] = str(queue_id)
        fields["queueOffset"] = str(result.queue_offset)
    return cmd.answer(code, remark or None, fields)


def unbatch(base: MessageExt) -> list[MessageExt]:
    """The messages of a SEND_BATCH_MESSAGE body, each with the header's fields.

    Raises:
        RequestError: MESSAGE_ILLEGAL for an undecodable or empty batch, or a delay level on
            the batch or on one of its messages (CommitLog.asyncPutMessages refuses the first,
            the client the second).
    """
    try:
        msgs = batch_messages(base, base.body)
    except ProtocolError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from exc
    if not msgs:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
    delay = MessageConst.DELAY_TIME_LEVEL
    # Checked on the batch first: each message's properties are merged over it. A message
    # without the property (nearly all) costs one membership test.
    for props in (base.properties, *(msg.properties for msg in msgs if delay in msg.properties)):
        if props.get(delay, "0") not in ("", "0"):
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL, "TimeDelayLevel is not supported for batch"
            )
    return msgs


def sent_message(messaging: MessagingService, channel: RemotingChannel, cmd: RemotingCommand,
                 resolved: dict[tuple[str, str, int], TopicConfig] | None = None,
                 ) -> tuple[MessageExt, int, bool]:  # fmt: skip
    """The message a send request (V1 or V2 header, a send or a reply) carries, with its topic
    resolved (auto-created when allowed) and its queue chosen, as RocketMQ's msgCheck does;
    with the header's maxReconsumeTimes (-1 when not sent) and batch flag. ``resolved`` keeps
    the topics resolved for the other sends of one run: nothing a resolution reads (the
    broker's role and permissions, the topic's config) changes within one.

    Raises:
        RequestError: a bad field, a topic that cannot be sent to, a queue it does not have.
    """
    (topic, default_topic, default_queue_nums, queue_id, flag, properties, sys_flag,
     born_timestamp, reconsume_times, max_reconsume_times, batch) = send_header(
        cmd.ext_fields, cmd.code in _V2_CODES, messaging.config.default_topic_queue_nums
    )  # fmt: skip
    if resolved is None:
        cfg = messaging.topic_for_send(topic, default_topic, default_queue_nums)
    elif (known := resolved.get(key := (topic, default_topic, default_queue_nums))) is not None:
        cfg = known
    else:
        cfg = resolved[key] = messaging.topic_for_send(topic, default_topic, default_queue_nums)
    msg = MessageExt(  # positional, in the fields' order: keywords cost twice, once per send
        topic, cmd.body, messaging.write_queue(cfg, queue_id), flag,
        decode_properties(properties), sys_flag, born_timestamp, born_host(channel),
        messaging.store_host, reconsume_times,
    )  # fmt: skip
    return msg, max_reconsume_times, batch


def v1_header(cmd: RemotingCommand) -> dict[str, str]:
    """A send request's header fields under their V1 names, whichever form it was sent in."""
    return v1_fields(cmd.ext_fields) if cmd.code in _V2_CODES else cmd.ext_fields


class SendHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.messaging = broker.messaging

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back,
        }

    def run_handlers(self) -> dict[int, RunHandler]:
        """The single sends a pipelining producer's read brings many of."""
        return {
            RequestCode.SEND_MESSAGE: self.send_run,
            RequestCode.SEND_MESSAGE_V2: self.send_run,
        }

    def send_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        """A send, made in the read that brought it: under ASYNC_FLUSH most sends wait for
        nothing and are answered before the read's callback returns, with no coroutine or
        task; the others of a read share one put (PutCoalescer) and are answered by the
        callback that makes it, with no task each. BENCHMARKS.md, "Sends made in the read" and
        "Held sends answered by callback"."""
        base, max_times, batch = sent_message(self.messaging, channel, cmd)
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE or batch:
            result = self.messaging.send_batch(unbatch(base))
        else:
            result = self.messaging.send_now(base, max_times if max_times >= 0 else None)
        return self._answer(cmd, base.queue_id, result)

    def send_run(
        self, channel: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]:
        """A read's single sends at once, each answered as ``send_message`` answers it: those
        no rule touches (``plain_send``) stored together (``MessagingService.send_run``), one
        pass for the run instead of one through every layer each; any other as
        ``send_message`` makes it, after the plain ones before it, so that the run's sends are
        appended in the order they came (parsed again there: such sends are rare in a run).
        BENCHMARKS.md, "A read's sends as one run"."""
        messaging = self.messaging
        results: list[HandlerResult | Exception] = [None] * len(cmds)
        plain: list[int] = []
        msgs: list[MessageExt] = []
        resolved: dict[tuple[str, str, int], TopicConfig] = {}
        for i, cmd in enumerate(cmds):
            try:
                base, _, batch = sent_message(messaging, channel, cmd, resolved)
            except Exception as exc:  # refused before anything was stored
                results[i] = exc
                continue
            if not batch and plain_send(base):
                plain.append(i)
                msgs.append(base)
                continue
            self._send_plain(cmds, plain, msgs, results)
            plain, msgs = [], []
            try:
                results[i] = self.send_message(channel, cmd)
            except Exception as exc:
                results[i] = exc
        self._send_plain(cmds, plain, msgs, results)
        return results

    def _send_plain(
        self, cmds: list[RemotingCommand], plain: list[int], msgs: list[MessageExt],
        results: list[HandlerResult | Exception],
    ) -> None:  # fmt: skip
        """Store ``msgs``, the plain sends of ``cmds`` at ``plain``, and put their answers at
        those places of ``results``."""
        if not msgs:
            return
        try:
            outcomes = self.messaging.send_run(msgs)
        except Exception as exc:  # each of them ends with it
            outcomes = [exc] * len(msgs)
        for i, msg, outcome in zip(plain, msgs, outcomes, strict=True):
            if isinstance(outcome, Exception):
                results[i] = outcome
                continue
            try:
                results[i] = self._answer(cmds[i], msg.queue_id, outcome)
            except Exception as exc:
                results[i] = exc

    def _answer(
        self, cmd: RemotingCommand, queue_id: int, result: PutResult | Pending[PutResult]
    ) -> RemotingCommand | Pending[RemotingCommand]:
        """A send's answer, or a Pending of it while its put waits."""
        if isinstance(result, PutResult):
            return put_response(cmd, result, queue_id, self.messaging.region_properties)
        answer: Pending[RemotingCommand] = Pending()
        result.then = functools.partial(self._answer_later, answer, cmd, queue_id)
        return answer

    def _answer_later(
        self, answer: Pending[RemotingCommand], cmd: RemotingCommand, queue_id: int,
        outcome: PutResult | Exception,
    ) -> None:  # fmt: skip
        if isinstance(outcome, Exception):
            answer.then(outcome)
            return
        try:
            response = put_response(cmd, outcome, queue_id, self.messaging.region_properties)
        except Exception as exc:  # refused (SYSTEM_ERROR) as an answer made at once would be
            answer.then(exc)
            return
        answer.then(response)

    async def consumer_send_msg_back(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        # The client's maximum, when it sends one (even -1: straight to the DLQ), else the
        # group's.
        sent_max = cmd.ext_fields.get("maxReconsumeTimes")
        result = await self.messaging.send_back(
            fields.group(cmd, "group"),
            fields.offset(cmd, "offset"),
            fields.java_int(cmd, "delayLevel", 0),
            fields.java_int(cmd, "maxReconsumeTimes") if sent_max else None,
        )
        if result is not None and not result.ok:
            remark = PUT_STATUS_CODES[result.status][1]
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{remark} {result.detail}".strip())
        return cmd.response(ResponseCode.SUCCESS)
