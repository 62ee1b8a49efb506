"""Administration: topics (UPDATE_AND_CREATE_TOPIC 17, DELETE_TOPIC_IN_BROKER 215,
GET_ALL_TOPIC_CONFIG 21), subscription groups (200, 201, 207), GET_CONSUME_STATS (208),
GET_BROKER_RUNTIME_INFO (28, ``broker/runtime_info.py``), and
the tables a slave copies from its master: GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_DELAY_OFFSET (45) (AdminBrokerProcessor). The GET_ALL bodies are the managers' files,
as RocketMQ answers them (with dataVersion where the file has one)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pocketmq.broker.handlers.stats import consume_stats
from pocketmq.broker.runtime_info import runtime_info
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import ProtocolError, RequestError
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_str
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.topic_attributes import ADD_SIGN, MESSAGE_TYPE, TopicMessageType, alter
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class AdminHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store
        self.topics = broker.topics
        self.groups = broker.subscription_groups

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_runtime_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
        }

    # ------------------------------------------------------------------ topics

    def update_and_create_topic(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        # RocketMQ answers SYSTEM_ERROR to an invalid topic name here (validateTopic).
        topic = fields.topic(cmd, code=ResponseCode.SYSTEM_ERROR)
        nums_r = fields.queue_nums(
            cmd, "readQueueNums", self.broker.config.default_topic_queue_nums
        )
        changes = fields.attributes(cmd)
        if (
            not self.broker.config.enable_mixed_message_type
            and changes.get(ADD_SIGN + MESSAGE_TYPE.name) == TopicMessageType.MIXED
        ):
            raise RequestError(
                ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."
            )
        current = self.topics.get(topic)
        self.topics.update(
            TopicConfig(
                topic_name=topic,
                read_queue_nums=nums_r,
                write_queue_nums=fields.queue_nums(cmd, "writeQueueNums", nums_r),
                perm=fields.perm(cmd, default=PERM_READ_WRITE),
                topic_filter_type=get_str(cmd, "topicFilterType", "SINGLE_TAG"),
                topic_sys_flag=fields.java_int(cmd, "topicSysFlag", 0),
                order=get_bool(cmd, "order"),
                attributes=alter(
                    {} if current is None else current.attributes, changes, create=current is None
                ),
            )
        )
        self.broker.register_soon()
        return cmd.response(ResponseCode.SUCCESS)

    def delete_topic(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        topic = fields.topic(cmd)
        self.topics.delete(topic)
        self.store.delete_topics({topic})
        self.broker.stats.on_topic_deleted(topic)
        self.broker.register_soon()
        return cmd.response(ResponseCode.SUCCESS)

    def get_all_topic_config(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(self.topics.wrapper()))

    # ------------------------------------------------------------------ offsets

    def get_all_consumer_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        body = json_body.dumps(self.broker.offsets.encode())
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def get_all_delay_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        body = json_body.dumps(self.broker.schedule.encode())
        return cmd.response(ResponseCode.SUCCESS, body=body)

    async def get_runtime_info(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        disk = await asyncio.to_thread(self.store.disk_usage, self.store.commitlog.mfq.directory)
        body = json_body.dumps({"table": runtime_info(self.broker, disk)})
        return cmd.response(ResponseCode.SUCCESS, body=body)

    # ------------------------------------------------------------------ consume stats

    def _consume_stats_topics(self, cmd: RemotingCommand, group: str) -> set[str]:
        listed = {t for t in cmd.ext_fields.get("topicList", "").split(";") if t}
        if listed:
            # A list is taken as it is, without the subscription check below.
            return listed
        topic = cmd.ext_fields.get("topic", "")
        topics = {topic} if topic.strip() else self.broker.offsets.topics_of_group(group)
        info = self.broker.consumers.groups.get(group)
        if info is not None and info.subscriptions:
            # While the group is online, topics it no longer subscribes to are left out.
            topics = {t for t in topics if t in info.subscriptions}
        return topics

    def get_consume_stats(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = fields.group(cmd)
        topics = self._consume_stats_topics(cmd, group)
        body = consume_stats(self.broker, group, topics) or {"consumeTps": 0.0, "offsetTable": {}}
        # mqadmin and other RocketMQ-aware readers were written against fastjson's bean keys.
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps_object_keys(body))

    # ------------------------------------------------------------------ subscription groups

    def update_subscription_group(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        try:
            data: Any = json_body.loads(cmd.body)
            if not isinstance(data, dict) or not str(data.get("groupName") or "").strip():
                raise ValueError("the body needs a groupName")
            cfg = SubscriptionGroupConfig.from_json(data)
        except (ProtocolError, TypeError, ValueError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"subscription group: {exc}") from exc
        fields.check_group(cfg.group_name)
        fields.check_java_int(cfg.retry_max_times, "retryMaxTimes")
        fields.check_java_int(cfg.broker_id, "brokerId")
        fields.check_java_int(cfg.which_broker_when_consume_slowly, "whichBrokerWhenConsumeSlowly")
        if cfg.retry_queue_nums:  # 0: the group wants no retries
            fields.check_queue_nums(cfg.retry_queue_nums, "retryQueueNums")
        self.groups.update(cfg)
        return cmd.response(ResponseCode.SUCCESS)

    def get_all_subscription_groups(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(self.groups.wrapper()))

    def delete_subscription_group(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        group = fields.group(cmd, "groupName")
        self.groups.delete(group)
        self.broker.stats.on_group_deleted(group)
        return cmd.response(ResponseCode.SUCCESS)
