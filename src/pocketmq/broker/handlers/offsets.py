"""Consumer offsets and queue positions: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29) and
GET_EARLIEST_MSG_STORETIME (32) (ConsumerManageProcessor, AdminBrokerProcessor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class OffsetHandlers:
    def __init__(self, broker: Broker) -> None:
        self.store = broker.store
        self.messaging = broker.messaging

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
        }

    def query_consumer_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        group, topic, queue_id = fields.group(cmd), fields.topic(cmd), fields.queue_id(cmd)
        offset = self.messaging.committed_offset(group, topic, queue_id)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
        if self.messaging.min_offset(topic, queue_id) <= 0:
            # Nothing ever removed from this queue: a new group starts at its beginning.
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        self.messaging.commit_offset(
            fields.group(cmd), fields.topic(cmd), fields.queue_id(cmd),
            fields.offset(cmd, "commitOffset"),
        )  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS)

    def get_max_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.messaging.max_offset(fields.topic(cmd), fields.queue_id(cmd))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_min_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.messaging.min_offset(fields.topic(cmd), fields.queue_id(cmd))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def search_offset_by_timestamp(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        offset = self.messaging.offset_by_time(
            fields.topic(cmd), fields.queue_id(cmd), fields.timestamp_ms(cmd, "timestamp")
        )
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_earliest_msg_storetime(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        ts = self.store.get_earliest_message_time(fields.topic(cmd), fields.queue_id(cmd))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": ts})
