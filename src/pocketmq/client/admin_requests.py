"""Requests a broker passes on from an admin tool to this client's consumers, answered as
RocketMQ's ClientRemotingProcessor does:

- RESET_CONSUMER_CLIENT_OFFSET (220, one-way): the group's consumer restarts the queues it
  holds of the topic at the offsets given (push and lite pull consumers alike).
- GET_CONSUMER_RUNNING_INFO (307): ConsumerRunningInfo as JSON: ``properties`` (settings, the
  name servers, consume type, start time), ``subscriptionSet``, ``mqTable`` (per held queue:
  committed offset, what is cached, orderly lock) and an empty ``statusTable`` (no consume
  rates are measured).
- CONSUME_MESSAGE_DIRECTLY (309): a push consumer's listener consumes the message in the body
  (ConsumeMessageDirectlyResult); other consumers answer as RocketMQ's do, that the group is
  not consumed here.

A group this client has no consumer of is answered SYSTEM_ERROR (307, 309) or logged (220).
A consumer registers these handlers on its client instance when it starts.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pocketmq import __version__
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.pull import Subscription, decode_messages
from pocketmq.client.route import MessageQueue
from pocketmq.errors import ClientError, ProtocolError, RequestError
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_str
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

if TYPE_CHECKING:
    from pocketmq.client.instance import ClientInstance

log = logging.getLogger(__name__)


@runtime_checkable
class ManagedConsumer(Protocol):
    """What these requests need of a consumer (RebalancingConsumer and its subclasses)."""

    group: str
    consume_type: str
    config: Any
    subscriptions: dict[str, Subscription]
    process_queues: dict[MessageQueue, ProcessQueue]
    start_timestamp_ms: int
    offset_store: Any

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _text(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return getattr(value, "__name__", None) or str(value)


def _queue_info(pq: ProcessQueue, commit_offset: int) -> dict[str, Any]:
    """ProcessQueueInfo of one held queue."""
    info: dict[str, Any] = {
        "commitOffset": commit_offset,
        "cachedMsgCount": len(pq.msgs),
        "cachedMsgSizeInMiB": pq.size_bytes >> 20,
        "transactionMsgCount": len(pq.taken),
        "locked": pq.locked,
        "droped": pq.dropped,  # sic: RocketMQ's field name
    }
    if pq.msgs:
        info["cachedMsgMinOffset"], info["cachedMsgMaxOffset"] = min(pq.msgs), max(pq.msgs)
    if pq.taken:
        info["transactionMsgMinOffset"] = min(pq.taken)
        info["transactionMsgMaxOffset"] = max(pq.taken)
    return info


def running_info(consumer: ManagedConsumer, namesrv_addrs: list[str]) -> dict[str, Any]:
    """ConsumerRunningInfo of a consumer, as RocketMQ's tools read it."""
    config = consumer.config
    props = {_camel(f.name): _text(getattr(config, f.name)) for f in dataclasses.fields(config)}
    props |= {
        "consumerGroup": consumer.group,
        "PROP_NAMESERVER_ADDR": ";".join(namesrv_addrs),
        "PROP_CONSUME_TYPE": consumer.consume_type,
        "PROP_CLIENT_VERSION": f"pocketmq-{__version__}",
        "PROP_CONSUMER_START_TIMESTAMP": str(consumer.start_timestamp_ms),
    }
    if hasattr(config, "orderly"):
        props["PROP_CONSUMEORDERLY"] = _text(config.orderly)
        props["PROP_THREADPOOL_CORE_SIZE"] = str(config.consume_concurrency)
    offsets = consumer.offset_store.offsets
    mq_table = {
        json_body.message_queue_key(mq.topic, mq.broker_name, mq.queue_id): _queue_info(
            pq, offsets.get(mq, -1)
        )
        for mq, pq in sorted(consumer.process_queues.items())
    }
    return {
        "properties": props,
        "subscriptionSet": [s.to_json() for _, s in sorted(consumer.subscriptions.items())],
        "mqTable": mq_table,
        "statusTable": {},
    }


def reset_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """The offsets of a RESET_CONSUMER_CLIENT_OFFSET body: ResetOffsetBody (a map keyed by
    MessageQueue) or, as brokers send a C++ admin's reset, ResetOffsetBodyForC (a list).

    Raises:
        RequestError: SYSTEM_ERROR for a body of neither shape.
    """
    try:
        table = json_body.loads(body).get("offsetTable") if body else {}
        if isinstance(table, list):
            return {MessageQueue.from_json(e): int(e["offset"]) for e in table}
        out = {}
        for key, offset in (table or {}).items():
            topic, broker, queue_id = json_body.parse_message_queue_key(key)
            out[MessageQueue(topic, broker, queue_id)] = int(offset)
        return out
    except (ProtocolError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"reset offset body: {exc}") from exc


class AdminRequests:
    """The handlers of one client instance, finding its consumers by group."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    def register(self) -> None:
        dispatcher = self.instance.dispatcher
        dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.reset_offset)
        dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_running_info)
        dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    def _consumer(self, group: str) -> ManagedConsumer | None:
        for member in self.instance.members:
            if isinstance(member, ManagedConsumer) and member.group == group:
                return member
        return None

    @staticmethod
    def _not_here(cmd: RemotingCommand, group: str) -> RemotingCommand:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
        )

    async def reset_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> None:
        group, topic = fields.group(cmd, "group"), fields.topic(cmd)
        consumer = self._consumer(group)
        if consumer is None:
            log.info("[reset-offset] consumer does not exist. group=%s", group)
            return
        await consumer.reset_offsets(topic, reset_offset_table(cmd.body))

    def get_running_info(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = fields.group(cmd)
        consumer = self._consumer(group)
        if consumer is None:
            return self._not_here(cmd, group)
        info = running_info(consumer, self.instance.namesrv_addrs)
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps_object_keys(info))

    async def consume_directly(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        group = fields.group(cmd)
        consumer = self._consumer(group)
        direct = getattr(consumer, "consume_directly", None)
        if direct is None:
            return self._not_here(cmd, group)
        broker_name = get_str(cmd, "brokerName", "")
        try:
            record = decode_message(cmd.body)
            mq = MessageQueue(record.topic, broker_name, record.queue_id)
            msgs: list[MessageExt] = decode_messages(cmd.body, mq)
        except (ProtocolError, ClientError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"message body: {exc}") from exc
        result = await direct(msgs[0], broker_name)
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(result))
