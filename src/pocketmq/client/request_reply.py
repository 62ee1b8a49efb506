"""Request-reply on the 4.x client: the requester's waiting replies and the replier's reply
message (RocketMQ's RequestFutureHolder, ClientRemotingProcessor.receiveReplyMessage and
MessageUtil.createReplyMessage).

A request is an ordinary message with three properties: CORRELATION_ID (a fresh UUID),
REPLY_TO_CLIENT (the requester's client id) and TTL (its timeout in ms). The replier answers
with a message to its cluster's reply topic carrying ``MSG_TYPE=reply`` and the request's three
properties; the broker pushes it back (PUSH_REPLY_MESSAGE_TO_CLIENT) to the client named by
REPLY_TO_CLIENT, where it resolves the future waiting under its correlation id. A reply that
finds no waiter (its request timed out) is logged and dropped, as RocketMQ does. No I/O here
beyond answering the push.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import zlib

from pocketmq.clock import Clock
from pocketmq.errors import ClientError
from pocketmq.protocol import fields
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.headers import get_str
from pocketmq.protocol.message import REPLY_MESSAGE_FLAG, Message, MessageConst, MessageExt, SysFlag
from pocketmq.protocol.names import reply_topic
from pocketmq.protocol.properties import decode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel
from pocketmq.remoting.client import split_addr

log = logging.getLogger(__name__)

# The properties a reply copies from its request.
_COPIED = (
    MessageConst.CORRELATION_ID,
    MessageConst.MESSAGE_REPLY_TO_CLIENT,
    MessageConst.MESSAGE_TTL,
)


def prepare_request(msg: Message, client_id: str, timeout_ms: int) -> str:
    """Mark ``msg`` as a request from this client (prepareSendRequest); returns its
    correlation id."""
    correlation_id = str(uuid.uuid4())
    msg.properties[MessageConst.CORRELATION_ID] = correlation_id
    msg.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = client_id
    msg.properties[MessageConst.MESSAGE_TTL] = str(timeout_ms)
    return correlation_id


def is_reply(msg: Message) -> bool:
    """A reply goes out with SEND_REPLY_MESSAGE_V2 instead of SEND_MESSAGE_V2."""
    return msg.properties.get(MessageConst.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def reply_message(
    request: MessageExt, body: bytes | str, properties: dict[str, str] | None = None
) -> Message:
    """The reply to a request message a consumer received: to the reply topic of the cluster
    the request was stored in, carrying the request's correlation id, requester and TTL.

    Raises:
        ClientError: the request carries no CLUSTER property (it is not a message a broker
            stored, or that broker does not stamp it).
    """
    cluster = request.properties.get(MessageConst.CLUSTER)
    if cluster is None:
        raise ClientError(
            "create reply message fail, requestMessage error, "
            f"property[{MessageConst.CLUSTER}] is null."
        )
    props = dict(properties or {})
    props[MessageConst.MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for name in _COPIED:
        if name in request.properties:
            props[name] = request.properties[name]
    data = body.encode() if isinstance(body, str) else body
    return Message(reply_topic(cluster), data, 0, props)


class ReplyWaiters:
    """The requests of one client instance waiting for their replies, by correlation id."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = fut
        return fut

    def forget(self, correlation_id: str) -> None:
        self._waiting.pop(correlation_id, None)

    def on_push_reply(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: hand the reply to the request waiting for it.

        Raises:
            RequestError: a header field the reply cannot be rebuilt without.
        """
        msg = MessageExt(
            topic=fields.topic(cmd, code=ResponseCode.SYSTEM_ERROR),
            body=cmd.body,
            queue_id=fields.java_int(cmd, "queueId", 0),
            flag=fields.java_int(cmd, "flag", 0),
            properties=decode_properties(get_str(cmd, "properties", "")),
            sys_flag=fields.java_int(cmd, "sysFlag", 0),
            born_timestamp=fields.timestamp_ms(cmd, "bornTimestamp", 0),
            store_timestamp=fields.timestamp_ms(cmd, "storeTimestamp", 0),
            reconsume_times=fields.java_int(cmd, "reconsumeTimes", 0),
        )
        try:
            if "bornHost" in cmd.ext_fields:
                msg.born_host = split_addr(cmd.ext_fields["bornHost"])
            if "storeHost" in cmd.ext_fields:
                msg.store_host = split_addr(cmd.ext_fields["storeHost"])
            if msg.sys_flag & SysFlag.COMPRESSED:
                msg.body = zlib.decompress(msg.body)
        except (ValueError, zlib.error) as exc:
            log.warning("a reply pushed by %s does not decode: %s", channel.peer, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        msg.properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(self.clock.now_ms())
        msg.msg_id = msg.uniq_key or ""
        correlation_id = msg.properties.get(MessageConst.CORRELATION_ID, "")
        fut = self._waiting.pop(correlation_id, None)
        if fut is None or fut.done():
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s , "
                "reply from host: %s", correlation_id, cmd.ext_fields.get("bornHost"),
            )  # fmt: skip
        else:
            fut.set_result(msg)
        return cmd.response(ResponseCode.SUCCESS)
