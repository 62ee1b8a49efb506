"""Message queries: VIEW_MESSAGE_BY_ID (33) by CommitLog offset and QUERY_MESSAGE (12) by key
and time range through the index (QueryMessageProcessor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_int, get_str
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
        raw = self.store.select_one_message_by_offset(get_int(cmd, "offset"))
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "can not find message by the offset")
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    def query_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        result = self.store.query_message(
            get_str(cmd, "topic"),
            get_str(cmd, "key"),
            get_int(cmd, "maxNum", 32),
            get_int(cmd, "beginTimestamp", 0),
            get_int(cmd, "endTimestamp", 2**62),
        )
        fields = {
            "indexLastUpdateTimestamp": result.index_last_update_timestamp,
            "indexLastUpdatePhyoffset": result.index_last_update_phy_offset,
        }
        if not result.messages:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                fields,
            )
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields, body=b"".join(result.messages))
