"""Admin requests the broker passes on to its clients (AdminBrokerProcessor with Broker2Client):
INVOKE_BROKER_TO_RESET_OFFSET (222), GET_CONSUMER_RUNNING_INFO (307) and
CONSUME_MESSAGE_DIRECTLY (309).

- Reset: the messaging service computes each queue's offset at the time asked; when the group
  has live consumers they are committed and every consumer is told one-way
  (RESET_CONSUMER_CLIENT_OFFSET, 220) to restart its queues there; the answer is the offset
  table (ResetOffsetBody). A group with no live consumer gets CONSUMER_NOT_ONLINE and nothing
  changes, as RocketMQ answers (mqadmin then commits the offsets itself).
- Running info and consume-directly go to the one consumer named by ``clientId`` and its
  answer comes back as it is; a consumer not connected is SYSTEM_ERROR "not online", one that
  does not answer within 10 s CONSUME_MSG_TIMEOUT.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pocketmq.errors import ProtocolError, RequestError
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_str
from pocketmq.protocol.message import decode_offset_msg_id
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# Broker2Client.callClient waits this long for a client's answer.
CALL_CLIENT_TIMEOUT_S = 10.0


class ClientAdminHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.messaging = broker.messaging
        self.consumers = broker.consumers

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    # ------------------------------------------------------------------ reset

    def reset_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        topic = fields.topic(cmd)
        group = fields.group(cmd, "group")
        timestamp_ms = fields.java_long(cmd, "timestamp")
        if fields.java_int(cmd, "queueId", -1) >= 0:
            # RocketMQ 5's server-side reset of one queue: refused rather than resetting them all.
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                "resetting one queue (queueId) is not supported: reset the topic by time",
            )
        table = self.messaging.reset_offsets(group, topic, timestamp_ms, get_bool(cmd, "isForce"))
        consumers = self.consumers.channels(group)
        if not consumers:
            remark = (f"Consumer not online, so can not reset offset, Group: {group} "
                      f"Topic: {topic} Timestamp: {timestamp_ms}")  # fmt: skip
            log.warning(remark)
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, remark)
        for queue_id, offset in table.items():
            self.messaging.commit_offset(group, topic, queue_id, offset)
        broker_name = self.broker.config.broker_name
        notice = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            {
                "topic": topic,
                "group": group,
                "timestamp": timestamp_ms,
                "isForce": get_bool(cmd, "isForce"),
            },
            _reset_body(topic, broker_name, table, for_cpp=cmd.language == LanguageCode.CPP),
        )
        for consumer in consumers:
            consumer.invoke_oneway(notice)
        log.info("reset the offsets of %s in %s to %s, told %d consumer(s)",
                 group, topic, table, len(consumers))  # fmt: skip
        return cmd.response(
            ResponseCode.SUCCESS, body=_reset_body(topic, broker_name, table, for_cpp=False)
        )

    # ------------------------------------------------------------------ forwarded

    async def get_consumer_running_info(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        return await self._call_consumer(cmd, fields.group(cmd), get_str(cmd, "clientId"))

    async def consume_message_directly(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        group, client_id = fields.group(cmd), get_str(cmd, "clientId")
        msg_id = get_str(cmd, "msgId")
        try:
            _, phy_offset = decode_offset_msg_id(msg_id)
        except ProtocolError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        raw = self.broker.store.select_one_message_by_offset(phy_offset)
        if raw is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"no message with the id {msg_id}")
        cmd.ext_fields["brokerName"] = self.broker.config.broker_name
        cmd.body = raw
        return await self._call_consumer(cmd, group, client_id)

    async def _call_consumer(
        self, cmd: RemotingCommand, group: str, client_id: str
    ) -> RemotingCommand:
        """The request as it came (header and body) to one consumer, and its answer."""
        target = self.consumers.find_channel(group, client_id)
        if target is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        forward = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), cmd.body)
        try:
            answer = await target.invoke(forward, CALL_CLIENT_TIMEOUT_S)
        except TimeoutError as exc:
            return cmd.response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer <{group}> <{client_id}> Timeout: {exc or 'no answer'}",
            )
        except ConnectionError as exc:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            )
        return cmd.response(answer.code, answer.remark, answer.ext_fields, answer.body)


def _reset_body(topic: str, broker_name: str, table: dict[int, int], *, for_cpp: bool) -> bytes:
    """ResetOffsetBody (a map keyed by MessageQueue, as fastjson writes it), or for a C++
    requester's consumers ResetOffsetBodyForC (a list)."""
    if for_cpp:
        return json_body.dumps({"offsetTable": [
            {"topic": topic, "brokerName": broker_name, "queueId": q, "offset": o}
            for q, o in table.items()
        ]})  # fmt: skip
    return json_body.dumps_object_keys({"offsetTable": {
        json_body.message_queue_key(topic, broker_name, q): o for q, o in table.items()
    }})  # fmt: skip
