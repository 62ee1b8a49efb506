"""Message queries: VIEW_MESSAGE_BY_ID (33) by CommitLog offset and QUERY_MESSAGE (12) by key
and time range through the index (QueryMessageProcessor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class QueryHandlers:
    def __init__(self, broker: Broker) -> None:
        self.store = broker.store

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.QUERY_MESSAGE: self.query_message,
        }

    def view_message_by_id(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        raw = self.store.select_one_message_by_offset(fields.offset(cmd, "offset"))
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "can not find message by the offset")
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    def query_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        result = self.store.query_message(
            fields.topic(cmd),
            get_str(cmd, "key"),
            fields.batch_size(cmd, "maxNum", 32),
            fields.java_long(cmd, "beginTimestamp", 0),
            fields.java_long(cmd, "endTimestamp", fields.JAVA_LONG_MAX),
        )
        ext = {
            "indexLastUpdateTimestamp": result.index_last_update_timestamp,
            "indexLastUpdatePhyoffset": result.index_last_update_phy_offset,
        }
        if not result.messages:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return cmd.response(ResponseCode.SUCCESS, ext_fields=ext, body=b"".join(result.messages))
