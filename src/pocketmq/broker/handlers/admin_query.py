"""Admin questions about topics, groups and clients (AdminBrokerProcessor):
GET_TOPIC_STATS_INFO (202), GET_CONSUMER_CONNECTION_LIST (203),
GET_PRODUCER_CONNECTION_LIST (204), QUERY_TOPIC_CONSUME_BY_WHO (300) and
CLONE_GROUP_OFFSET (314). The answers are computed in ``broker/admin_views.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker import admin_views
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class AdminQueryHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connections,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
        }

    def get_topic_stats(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        body = admin_views.topic_stats(self.broker, fields.topic(cmd))
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps_object_keys(body))

    def get_consumer_connections(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        body = admin_views.consumer_connection(self.broker, fields.group(cmd))
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(body))

    def get_producer_connections(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        body = admin_views.producer_connection(self.broker, fields.group(cmd, "producerGroup"))
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(body))

    def query_topic_consume_by_who(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        groups = admin_views.groups_consuming(self.broker, fields.topic(cmd))
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps({"groupList": groups}))

    def clone_group_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        src, dest = fields.group(cmd, "srcGroup"), fields.group(cmd, "destGroup")
        topic = cmd.ext_fields.get("topic") or ""
        if topic.strip():
            fields.check_topic(topic)
        cloned = admin_views.clone_group_offsets(
            self.broker, src, dest, topic, get_bool(cmd, "offline")
        )
        # RocketMQ answers SUCCESS either way (a broker of the route may hold none of the
        # group's offsets); the remark says what this broker copied.
        remark = f"cloned {', '.join(cloned)}" if cloned else f"{src} has no offsets to clone here"
        return cmd.response(ResponseCode.SUCCESS, remark)
