"""Request-reply: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325), as RocketMQ's
ReplyMessageProcessor serves them.

A replier sends its reply (``MSG_TYPE=reply``) to the cluster's reply topic like any message;
the broker pushes it at once (PUSH_REPLY_MESSAGE_TO_CLIENT, 326) to the requester, the client
whose heartbeat named the reply's ``REPLY_TO_CLIENT`` property, and answers the replier with
that push's outcome: SUCCESS, or SYSTEM_ERROR when the requester is not connected, refuses or
does not answer within 10 s. With ``storeReplyMessageEnable`` (the default) the reply is also
kept in the reply topic, whatever the push did. No reply is ever queued for a requester that
connects later: a request outlives its TTL only in the requester's own timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pocketmq.broker.handlers.client_admin import CALL_CLIENT_TIMEOUT_S
from pocketmq.broker.handlers.send import sent_message, v1_header
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# The send header fields a reply push repeats (ReplyMessageRequestHeader), by V1 name.
_PUSHED_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                  "sysFlag", "bornTimestamp", "flag", "reconsumeTimes", "unitMode")  # fmt: skip


def client_channel(channels: Iterable[RemotingChannel], client_id: str) -> RemotingChannel | None:
    """The open connection of the client whose heartbeat gave this id (findChannel)."""
    for channel in channels:
        if channel.is_open and channel.attributes.get("client_id") == client_id:
            return channel
    return None


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


class ReplyHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.messaging = broker.messaging

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.SEND_REPLY_MESSAGE: self.send_reply_message,
            RequestCode.SEND_REPLY_MESSAGE_V2: self.send_reply_message,
        }

    async def send_reply_message(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        msg, _, _ = sent_message(self.messaging, channel, cmd)
        pushed, remark = await self._push(cmd, msg)
        ext: dict[str, object] = dict(self.messaging.region_properties)
        if pushed:
            # RocketMQ answers a zero id and offset when the reply is not stored.
            ext |= {"msgId": "0", "queueId": msg.queue_id, "queueOffset": 0}
        result = await self.messaging.store_reply(msg)
        if result is not None and result.ok:
            ext |= {"msgId": result.msg_ids[0], "queueId": msg.queue_id,
                    "queueOffset": result.queue_offset}  # fmt: skip
        elif result is not None:
            log.warning("storing the reply %s failed: %s %s", msg.uniq_key, result.status,
                        result.detail)  # fmt: skip
        if not pushed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark, ext)
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    async def _push(self, cmd: RemotingCommand, msg: MessageExt) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester: whether it took the reply, else why
        not (RocketMQ's remarks)."""
        requester = msg.properties.get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if requester is None:
            log.warning("%s is null, can not reply message", MessageConst.MESSAGE_REPLY_TO_CLIENT)
            return (
                False,
                f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null",
            )
        server = self.broker.server
        target = client_channel(server.channels if server else (), requester)
        if target is None:
            remark = f"push reply message fail, channel of <{requester}> not found."
            log.warning(remark)
            return False, remark
        props = dict(msg.properties)
        props[MessageConst.PUSH_REPLY_TIME] = str(self.broker.clock.now_ms())
        sent = v1_header(cmd)
        header: dict[str, object] = {k: sent[k] for k in _PUSHED_FIELDS if k in sent}
        header |= {
            "properties": encode_properties(props),
            "bornHost": _host(msg.born_host),
            "storeHost": _host(msg.store_host),
            "storeTimestamp": self.broker.clock.now_ms(),
        }
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, msg.body)
        try:
            answer = await target.invoke(push, CALL_CLIENT_TIMEOUT_S)
        except (ConnectionError, TimeoutError) as exc:
            log.warning("push reply message to <%s> fail: %s", requester, exc)
            return False, f"push reply message to {requester}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s",
                        requester, answer.remark)  # fmt: skip
            return False, f"push reply message to {requester}fail."
        return True, ""
