"""Producer: sync, async, one-way, batch and ordered sends (DefaultMQProducer).

A send picks a queue of the topic's route (cached, refreshed every 30 s and whenever a topic is
new), sends it to that queue's master and, if that fails, retries on another queue, avoiding the
broker that just failed. Retries are bounded by ``retry_times`` (2, so 3 attempts) and by the
send timeout, which covers every attempt together. Topics unknown to the NameServer are sent with
the route of ``TBW102`` so that a broker with autoCreateTopicEnable creates them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from pocketmq.client.fault import QueueSelector
from pocketmq.client.ids import new_message_id, new_message_ids
from pocketmq.client.instance import ClientInstance, new_client_instance
from pocketmq.client.request_reply import is_reply, prepare_request, reply_message
from pocketmq.client.route import MessageQueue, TopicRoute
from pocketmq.errors import BrokerError, ClientError, RequestTimeoutError
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.batch import encode_batch_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import Message as Message
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, delay_property
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY, is_retry_topic, topic_error
from pocketmq.protocol.properties import encode_properties, java_string_hash
from pocketmq.protocol.remoting import RemotingCommand

log = logging.getLogger(__name__)

# A broker answering these may serve the next attempt on another broker (sendDefaultImpl).
RETRYABLE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def message(
    topic: str,
    body: bytes | str,
    *,
    tags: str | None = None,
    keys: str | Sequence[str] | None = None,
    properties: dict[str, str] | None = None,
    flag: int = 0,
) -> Message:
    """A Message with its tags, keys (several are joined by spaces, as RocketMQ does) and
    user properties."""
    props = dict(properties) if properties else {}
    if tags:
        props[MessageConst.TAGS] = tags
    if keys:
        props[MessageConst.KEYS] = keys if isinstance(keys, str) else " ".join(keys)
    return Message(topic, body.encode() if isinstance(body, str) else body, flag, props)


def is_half(msg: Message) -> bool:
    """A transaction's half message (TRAN_MSG=true): sent with the PREPARED sys flag."""
    return msg.properties.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true"


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_SEND_OK_CODES = tuple(_SEND_STATUS)


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str  # the client's UNIQ_KEY (comma-separated for a batch)
    offset_msg_id: str  # the broker's id: store host + commitlog offset
    message_queue: MessageQueue
    queue_offset: int


# (queues, message, arg) -> queue
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByHash: abs(arg.hashCode()) % queues, with Java's String hash so that a
    key lands on the same queue as from a Java producer."""
    h = java_string_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(h) % len(queues)]


class CommunicationMode(enum.Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


def check_topic(topic: str) -> None:
    """Validators.checkTopic: a valid topic name that is not the auto-creation template.

    Raises:
        ClientError: what is wrong with the name.
    """
    err = topic_error(topic)
    if err is not None:
        raise ClientError(err)
    if topic == AUTO_CREATE_TOPIC_KEY:
        raise ClientError(f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")


class Producer:
    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | list[str] = "127.0.0.1:9876",
        *,
        send_timeout_ms: int = 3000,
        retry_times: int = 2,
        retry_times_async: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        send_latency_fault_enable: bool = False,
        compress_over_bytes: int = 4096,
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        default_topic_queue_nums: int = 4,
        instance_name: str | None = None,
        instance: ClientInstance | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.group = group
        self.send_timeout_ms = send_timeout_ms
        self.retry_times = retry_times
        self.retry_times_async = retry_times_async
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over_bytes = compress_over_bytes
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self._own_instance = instance is None
        self.instance = instance or new_client_instance(namesrv_addr, instance_name, credentials)
        self.selector = QueueSelector(send_latency_fault_enable, clock=self.instance.clock)
        self._publish: dict[str, TopicRoute] = {}
        # Whether a request has heartbeated the brokers (so they can push replies here).
        self._heartbeat_told = False
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self.instance.members.append(self)
        await self.instance.start()
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        self.instance.members.remove(self)
        await self.instance.unregister(self.group, None)
        if self._own_instance:
            await self.instance.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ClientMember
    def topics(self) -> set[str]:
        return set(self._publish)

    def heartbeat_data(self) -> dict[str, Any]:
        return {"groupName": self.group}

    def on_route_changed(self, route: TopicRoute) -> None:
        if route.topic in self._publish or route.topic == AUTO_CREATE_TOPIC_KEY:
            self._publish[route.topic] = route

    # ------------------------------------------------------------------ public API

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer, retrying on another broker on failure.

        With ``queue`` or ``selector`` (ordered sends) there is exactly one attempt, since
        another queue would break the order.

        Raises:
            ClientError: invalid message, no route, or every attempt failed.
            BrokerError: a broker refused the message with a non-retryable code.
        """
        result = await self._send(msg, CommunicationMode.SYNC, queue, selector, arg, timeout_ms)
        assert result is not None
        return result

    async def send_async(self, msg: Message, *, timeout_ms: int | None = None) -> SendResult:
        """Like send, with ``retry_times_async`` retries (the Java async mode)."""
        result = await self._send(msg, CommunicationMode.ASYNC, None, None, None, timeout_ms)
        assert result is not None
        return result

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Write the message without waiting for any answer: no result, no retry."""
        await self._send(msg, CommunicationMode.ONEWAY, queue, selector, arg, None)

    async def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send messages of one topic as one request, stored together in one queue.

        Raises:
            ClientError: empty batch, mixed topics, delayed or retry-topic messages, too big.
        """
        if not messages:
            raise ClientError("the batch is empty")
        topic = messages[0].topic
        for m in messages:
            if m.topic != topic:
                raise ClientError("The topic of the messages in one batch should be the same")
            if m.properties.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0"):
                raise ClientError("TimeDelayLevel is not supported for batching")
            if is_half(m):
                # The broker stores a batch as normal messages: a half would be delivered.
                raise ClientError("Transactional messages are not supported for batching")
            if is_retry_topic(topic):
                raise ClientError("Retry Group is not supported for batching")
            if not m.body:
                raise ClientError("the message body length is zero")
        # Each message gets its id in place, as a single send's does (RocketMQ's
        # MessageBatch.generateFromList sets the ids on the caller's messages too).
        uniq_key = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        for m, new_id in zip(messages, new_message_ids(len(messages)), strict=True):
            if uniq_key not in m.properties:
                m.properties[uniq_key] = new_id
        batch = Message(topic, encode_batch_body(messages))
        uniq = ",".join([m.properties[uniq_key] for m in messages])
        result = await self._send(
            batch, CommunicationMode.SYNC, queue, None, None, timeout_ms, batch_ids=uniq
        )
        assert result is not None
        return result

    async def request(self, msg: Message, timeout_ms: int | None = None) -> MessageExt:
        """Send a request message and wait for its reply (DefaultMQProducer.request): the
        consumer that gets it answers with ``Producer.reply``. ``timeout_ms`` (the send
        timeout when None) covers the send and the wait, and travels with the request as TTL.

        Raises:
            RequestTimeoutError: the request was sent, but no reply came within timeout_ms.
            ClientError: the request could not be sent (its cause says why).
        """
        timeout = timeout_ms if timeout_ms is not None else self.send_timeout_ms
        begin = time.monotonic()
        correlation_id = prepare_request(msg, self.instance.client_id, timeout)
        if msg.topic not in self.instance.routes or not self._heartbeat_told:
            # The reply is pushed over the connection this client heartbeats on.
            await self._publish_route(msg.topic)
            await self.instance.send_heartbeat()
            self._heartbeat_told = True
        reply = self.instance.replies.expect(correlation_id)
        try:
            cost = (time.monotonic() - begin) * 1000
            try:
                await self.send_async(msg, timeout_ms=max(int(timeout - cost), 1))
            except ClientError as exc:
                raise ClientError(f"send request message to <{msg.topic}> fail: {exc}") from exc
            remaining_s = (timeout - (time.monotonic() - begin) * 1000) / 1000
            try:
                async with asyncio.timeout(max(remaining_s, 0)):
                    return await reply
            except TimeoutError:
                raise RequestTimeoutError(
                    f"send request message to <{msg.topic}> OK, but wait reply message "
                    f"timeout, {timeout} ms."
                ) from None
        finally:
            self.instance.replies.forget(correlation_id)

    async def reply(
        self, request: MessageExt, body: bytes | str, properties: dict[str, str] | None = None
    ) -> SendResult:
        """Answer a request message a consumer received: the reply goes to the reply topic of
        the request's cluster, and its broker pushes it to the requester.

        Raises:
            ClientError: ``request`` is not a stored request message (no CLUSTER), or the
                reply could not be sent (BrokerError: SYSTEM_ERROR when the requester is gone).
        """
        return await self.send(reply_message(request, body, properties))

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return list((await self._publish_route(topic)).write_queues)

    # ------------------------------------------------------------------ send path

    def _check_message(self, msg: Message) -> None:
        check_topic(msg.topic)
        if not msg.body:
            raise ClientError("the message body length is zero")
        if len(msg.body) > self.max_message_size:
            raise ClientError(f"the message body size over max value, MAX: {self.max_message_size}")
        delayed_by = delay_property(msg.properties) if is_half(msg) else None
        if delayed_by is not None:
            # Java's sendMessageInTransaction drops the DELAY level without a word; the
            # application would never learn its delay was ignored.
            raise ClientError(f"a transactional message cannot be delayed: it has {delayed_by}")

    async def _publish_route(self, topic: str) -> TopicRoute:
        """The route to send a topic with (tryToFindTopicPublishInfo).

        Raises:
            ClientError: neither the topic nor TBW102 has a writable route.
        """
        route = self._publish.get(topic)
        if route is not None and route.write_queues:
            return route
        self._publish.setdefault(topic, TopicRoute(topic, {}))
        fetched = await self.instance.update_route(topic)
        if fetched is not None and fetched.write_queues:
            self._publish[topic] = fetched
            return fetched
        default = await self.instance.fetch_route(AUTO_CREATE_TOPIC_KEY)
        if default is not None and default.write_queues:
            # The default topic's brokers create the topic on first send, with at most
            # default_topic_queue_nums queues.
            queues = [
                MessageQueue(topic, q.broker_name, q.queue_id)
                for q in default.write_queues
                if q.queue_id < self.default_topic_queue_nums
            ]
            for name, addrs in default.broker_addrs.items():
                self.instance.broker_addrs.setdefault(name, addrs)
            return TopicRoute(topic, default.broker_addrs, queues, [])
        raise ClientError(
            f"No route info of this topic: {topic}, see "
            "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
        )

    async def _send(
        self,
        msg: Message,
        mode: CommunicationMode,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout_ms: int | None,
        *,
        batch_ids: str | None = None,
    ) -> SendResult | None:
        if not self._started:
            raise ClientError(
                "The producer service state not OK, maybe started once or not started"
            )
        self._check_message(msg)
        timeout = timeout_ms if timeout_ms is not None else self.send_timeout_ms
        begin = time.monotonic()
        route = self._publish.get(msg.topic)
        if route is None or not route.write_queues:
            route = await self._publish_route(msg.topic)
        if batch_ids is None and MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties:
            msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_message_id()
        if queue is not None or selector is not None:
            if selector is not None:
                queue = selector(route.write_queues, msg, arg)
            assert queue is not None
            cost = (time.monotonic() - begin) * 1000
            if cost >= timeout:
                raise ClientError("sendSelectImpl call timeout")
            return await self._send_kernel(msg, queue, route, mode, timeout - cost, batch_ids)

        total = 1
        if mode is CommunicationMode.SYNC:
            total += self.retry_times
        elif mode is CommunicationMode.ASYNC:
            total += self.retry_times_async
        last_broker: str | None = None
        brokers_sent: list[str] = []
        error: Exception | None = None
        for _ in range(total):
            mq = self.selector.select(route.write_queues, last_broker)
            brokers_sent.append(mq.broker_name)
            start = time.monotonic()
            cost = (start - begin) * 1000
            if cost >= timeout:
                error = TimeoutError(f"send timed out after {cost:.0f} ms")
                break
            try:
                result = await self._send_kernel(msg, mq, route, mode, timeout - cost, batch_ids)
            except (ConnectionError, TimeoutError, ClientError) as exc:
                self._record(mq, start, isolation=True)
                error, last_broker = exc, mq.broker_name
                log.info("send to %s failed, %s", mq, exc)
                if isinstance(exc, BrokerError) and exc.code not in RETRYABLE_CODES:
                    raise
                if isinstance(exc, BrokerError) and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    route = await self._publish_route(msg.topic)
                continue
            self._record(mq, start, isolation=False)
            if (
                self.retry_another_broker_when_not_store_ok
                and result is not None
                and result.status is not SendStatus.SEND_OK
            ):
                last_broker = mq.broker_name
                continue
            return result
        raise ClientError(
            f"Send [{len(brokers_sent)}] times, still failed, cost "
            f"[{(time.monotonic() - begin) * 1000:.0f}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {brokers_sent}: {error}"
        ) from error

    def _record(self, mq: MessageQueue, start: float, *, isolation: bool) -> None:
        # Only fault tolerance reads latencies: without it, no clock reading per send.
        if self.selector.enabled:
            self.selector.update_fault_item(
                mq.broker_name, (time.monotonic() - start) * 1000, isolation
            )

    async def _send_kernel(
        self,
        msg: Message,
        mq: MessageQueue,
        route: TopicRoute,
        mode: CommunicationMode,
        timeout_ms: float,
        batch_ids: str | None,
    ) -> SendResult | None:
        addr = self.instance.master_addr(mq.broker_name) or route.master(mq.broker_name)
        if addr is None:
            await self.instance.update_route(msg.topic)
            addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        body, sys_flag = msg.body, 0
        if batch_ids is None and len(body) > self.compress_over_bytes:
            body, sys_flag = zlib.compress(body, self.compress_level), SysFlag.COMPRESSED
        props = msg.properties
        reconsume_times, max_reconsume = "0", None
        if is_retry_topic(msg.topic):
            # A consumer re-sending a failed message: the counters travel in the header.
            props = dict(props)
            reconsume_times = str(int(props.pop(MessageConst.RECONSUME_TIME, "0") or 0))
            max_reconsume = props.pop(MessageConst.MAX_RECONSUME_TIMES, None)
        if is_half(msg):
            sys_flag |= SysFlag.TRANSACTION_PREPARED_TYPE
        # SendMessageRequestHeaderV2: the one-letter field names RocketMQ clients send, with
        # the values already in their wire text, so that the command is built without
        # RemotingCommand.request's conversion of every field (this runs once per send).
        fields = {
            "a": self.group,
            "b": msg.topic,
            "c": AUTO_CREATE_TOPIC_KEY,
            "d": str(self.default_topic_queue_nums),
            "e": str(mq.queue_id),
            "f": str(sys_flag),
            "g": str(int(time.time() * 1000)),
            "h": str(msg.flag),
            "i": encode_properties(props),
            "j": reconsume_times,
            "k": "false",
            "m": "false" if batch_ids is None else "true",
        }
        if max_reconsume is not None:
            fields["l"] = str(int(max_reconsume))
        code = RequestCode.SEND_MESSAGE_V2
        if batch_ids is not None:
            code = RequestCode.SEND_BATCH_MESSAGE
        elif is_reply(msg):
            code = RequestCode.SEND_REPLY_MESSAGE_V2
        if mode is CommunicationMode.ONEWAY:
            await self.instance.invoke_oneway(addr, code, fields, body)
            return None
        resp = await self.instance.invoke_command(
            addr,
            RemotingCommand(code, ext_fields=fields, body=body),
            timeout_s=timeout_ms / 1000,
            ok=_SEND_OK_CODES,
        )
        f = resp.ext_fields
        queue_id = f.get("queueId")
        if queue_id is not None and int(queue_id) != mq.queue_id:
            mq = MessageQueue(mq.topic, mq.broker_name, int(queue_id))
        return SendResult(  # positional: keywords cost a third more, once per send
            _SEND_STATUS[resp.code],
            batch_ids or msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX],
            f.get("msgId", ""),
            mq,
            int(f.get("queueOffset", -1)),
        )
