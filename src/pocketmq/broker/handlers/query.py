"""Message queries: VIEW_MESSAGE_BY_ID (33) by CommitLog offset and QUERY_MESSAGE (12) by key
and time range through the index (QueryMessageProcessor).

A query at most returns ``maxMsgsNumBatch`` (64) records, as RocketMQ's index caps it; one
flagged ``_UNIQUE_KEY_QUERY`` (a lookup by message id, whose copies a resending producer may
have stored more than once) returns up to ``defaultQueryMaxNum`` (32), whatever it asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

# MixAll.UNIQUE_MSG_QUERY_FLAG, and MessageStoreConfig's defaultQueryMaxNum and maxMsgsNumBatch.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
DEFAULT_QUERY_MAX_NUM = 32
MAX_MSGS_NUM_BATCH = 64


class QueryHandlers:
    def __init__(self, broker: Broker) -> None:
        self.store = broker.store

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.QUERY_MESSAGE: self.query_message,
        }

    def view_message_by_id(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        offset = fields.offset(cmd, "offset")
        raw = self.store.select_one_message_by_offset(offset)
        if raw is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    def query_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        max_num = fields.batch_size(cmd, "maxNum", DEFAULT_QUERY_MAX_NUM)
        if get_bool(cmd, UNIQUE_MSG_QUERY_FLAG):
            max_num = DEFAULT_QUERY_MAX_NUM
        result = self.store.query_message(
            fields.topic(cmd),
            get_str(cmd, "key"),
            min(max_num, MAX_MSGS_NUM_BATCH),
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
