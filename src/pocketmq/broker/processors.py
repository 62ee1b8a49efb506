"""Request handlers of the broker, one per request code, as RocketMQ's processors serve them.

Each handler parses its header from ext_fields, checks topic, permissions and queue, calls the
store and maps the outcome to a response code through status_map.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from pocketmq.broker.status_map import PUT_STATUS_CODES, pull_code
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import (
    AUTO_CREATE_TOPIC_KEY,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    topic_error,
)
from pocketmq.errors import ProtocolError, RequestError
from pocketmq.namesrv.route_table import PERM_READ, PERM_WRITE
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_int, get_str
from pocketmq.protocol.message import (
    MessageConst,
    MessageExt,
    decode_batch_body,
    decode_properties,
    host_to_bytes,
)
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel
from pocketmq.store import GetStatus, PutResult, TagFilter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# SendMessageRequestHeaderV2 uses one-letter names for the same fields.
_V2_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
    "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
    "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch",
    "n": "brokerName",
}  # fmt: skip
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2


def _born_host(channel: RemotingChannel) -> tuple[str, int]:
    host, _, port = channel.peer.rpartition(":")
    try:
        host_to_bytes((host.strip("[]"), int(port)))
        return host.strip("[]"), int(port)
    except ValueError:
        return "127.0.0.1", 0


class BrokerProcessors:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store
        self.topics = broker.topics

    def register(self, dispatcher: Dispatcher) -> None:
        for code, handler in (
            (RequestCode.SEND_MESSAGE, self.send_message),
            (RequestCode.SEND_MESSAGE_V2, self.send_message),
            (RequestCode.SEND_BATCH_MESSAGE, self.send_message),
            (RequestCode.CONSUMER_SEND_MSG_BACK, self.consumer_send_msg_back),
            (RequestCode.PULL_MESSAGE, self.pull_message),
            (RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset),
            (RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset),
            (RequestCode.GET_MAX_OFFSET, self.get_max_offset),
            (RequestCode.GET_MIN_OFFSET, self.get_min_offset),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime),
            (RequestCode.HEART_BEAT, self.heart_beat),
            (RequestCode.UNREGISTER_CLIENT, self.unregister_client),
            (RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list),
            (RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id),
            (RequestCode.QUERY_MESSAGE, self.query_message),
            (RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic),
            (RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic),
            (RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config),
            (RequestCode.GET_CONSUME_STATS, self.get_consume_stats),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_subscription_group),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_groups),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group),
            (RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq),
            (RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq),
        ):
            dispatcher.register(code, handler)

    # ------------------------------------------------------------------ send

    def topic_for_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig:
        """The config of a topic a producer sends to, auto-created when enabled; shared by
        the remoting and gRPC send paths.

        Raises:
            RequestError: an invalid or system topic, a missing topic, or no write permission.
        """
        self._check_broker_writable()
        err = topic_error(topic)
        if err is not None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, err)
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system topic."
            )
        cfg = self.topics.get(topic)
        if cfg is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            cfg = self.topics.create_system_if_absent(topic, 1, PERM_READ | PERM_WRITE)
        if cfg is None and self.broker.config.auto_create_topic_enable:
            cfg = self.topics.create_in_send(
                topic, default_topic or AUTO_CREATE_TOPIC_KEY, queue_nums
            )
        if cfg is None:
            raise RequestError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not cfg.perm & PERM_WRITE:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return cfg

    async def put_single(
        self, msg: MessageExt, max_reconsume_times: int | None = None
    ) -> PutResult:
        """Store one message a producer sent, as the remoting and gRPC send paths share it:
        a send to a retry topic may be dead-lettered, timer and delay-level messages are parked
        in their system topics, then the store appends it.

        Raises:
            RequestError: an unknown retry group, or a bad timer or delay property.
        """
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            self._retry_or_dead_letter(msg, max_reconsume_times)
        self.broker.timer.rewrite(msg)
        self.broker.schedule.rewrite(msg)
        return await self.store.put_messages([msg])

    async def send_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        # Java clients send V2 (one-letter) headers with SEND_BATCH_MESSAGE too.
        if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            cmd.ext_fields = {_V2_NAMES.get(k, k): v for k, v in cmd.ext_fields.items()}
        topic = get_str(cmd, "topic")
        cfg = self.topic_for_send(
            topic,
            get_str(cmd, "defaultTopic", AUTO_CREATE_TOPIC_KEY),
            get_int(cmd, "defaultTopicQueueNums", self.broker.config.default_topic_queue_nums),
        )
        queue_id = get_int(cmd, "queueId", -1)
        if queue_id < 0:
            queue_id = random.randrange(cfg.write_queue_nums)
        if queue_id >= cfg.write_queue_nums:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {topic} has "
                f"{cfg.write_queue_nums} write queues",
            )
        base = MessageExt(
            topic=topic,
            body=cmd.body,
            queue_id=queue_id,
            flag=get_int(cmd, "flag", 0),
            properties=decode_properties(get_str(cmd, "properties", "")),
            sys_flag=get_int(cmd, "sysFlag", 0),
            born_timestamp=get_int(cmd, "bornTimestamp", 0),
            born_host=_born_host(channel),
            store_host=self.store.commitlog.store_host,
            reconsume_times=get_int(cmd, "reconsumeTimes", 0),
        )
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE or get_bool(cmd, "batch"):
            result = await self.store.put_messages(self._unbatch(base))
        else:
            max_times = get_int(cmd, "maxReconsumeTimes", -1)
            result = await self.put_single(base, max_times if max_times >= 0 else None)
        code, remark = PUT_STATUS_CODES[result.status]
        if result.detail and code != ResponseCode.SUCCESS:
            remark = f"{remark} {result.detail}".strip()
        if not result.phy_offsets:
            return cmd.response(code, remark or None)
        return cmd.response(
            code,
            remark or None,
            ext_fields={
                "msgId": ",".join(result.msg_ids),
                "queueId": queue_id,
                "queueOffset": result.queue_offset,
            },
        )

    def _check_broker_writable(self) -> None:
        if not self.broker.config.broker_permission & PERM_WRITE:
            raise RequestError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.config.broker_ip1}] sending message is forbidden",
            )

    def _subscription_group(self, group: str) -> SubscriptionGroupConfig:
        sub = self.broker.subscription_groups.find(group)
        if sub is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        return sub

    def _retry_or_dead_letter(self, msg: MessageExt, max_reconsume_times: int | None) -> None:
        """A client sending to a retry topic itself (when CONSUMER_SEND_MSG_BACK failed): past
        the group's maximum, or for an ordered group, the message goes to the DLQ instead."""
        group = msg.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sub = self._subscription_group(group)
        max_times = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
        if msg.reconsume_times > max_times or self.broker.locks.has_live_locks(group):
            self._to_dead_letter(group, msg)

    def _to_dead_letter(self, group: str, msg: MessageExt) -> None:
        msg.topic = DLQ_GROUP_TOPIC_PREFIX + group
        msg.queue_id = 0
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        self.topics.create_system_if_absent(msg.topic, 1, PERM_READ | PERM_WRITE)

    async def consumer_send_msg_back(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        """A consumer failed a message: store it again in the group's retry topic at a delay
        level (3 + times retried, unless the client chose one), or in its DLQ past the maximum
        or when the level is negative."""
        group = get_str(cmd, "group")
        sub = self._subscription_group(group)
        self._check_broker_writable()
        if sub.retry_queue_nums <= 0:
            return cmd.response(ResponseCode.SUCCESS)  # the group wants no retries
        offset = get_int(cmd, "offset")
        origin = self.store.look_message_by_offset(offset)
        if origin is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        props = dict(origin.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, origin.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        origin_id = props.get(MessageConst.ORIGIN_MESSAGE_ID) or origin.uniq_key or origin.msg_id
        props[MessageConst.ORIGIN_MESSAGE_ID] = origin_id
        msg = MessageExt(
            topic=RETRY_GROUP_TOPIC_PREFIX + group,
            body=origin.body,
            queue_id=random.randrange(sub.retry_queue_nums),
            flag=origin.flag,
            properties=props,
            sys_flag=origin.sys_flag,
            born_timestamp=origin.born_timestamp,
            born_host=origin.born_host,
            store_host=self.store.commitlog.store_host,
            reconsume_times=origin.reconsume_times + 1,
        )
        max_times = get_int(cmd, "maxReconsumeTimes", sub.retry_max_times)
        level = get_int(cmd, "delayLevel", 0)
        if origin.reconsume_times >= max_times or level < 0:
            self._to_dead_letter(group, msg)
        else:
            cfg = self.topics.create_system_if_absent(
                msg.topic, sub.retry_queue_nums, PERM_READ | PERM_WRITE
            )
            msg.queue_id %= max(cfg.write_queue_nums, 1)
            props[MessageConst.DELAY_TIME_LEVEL] = str(level or 3 + origin.reconsume_times)
            self.broker.schedule.rewrite(msg)
        result = await self.store.put_message(msg)
        if not result.ok:
            remark = PUT_STATUS_CODES[result.status][1]
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{remark} {result.detail}".strip())
        return cmd.response(ResponseCode.SUCCESS)

    @staticmethod
    def _unbatch(base: MessageExt) -> list[MessageExt]:
        try:
            parts = decode_batch_body(base.body)
        except ProtocolError as exc:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from exc
        if not parts:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
        msgs = []
        for flag, body, props in parts:
            if props.get("DELAY", "0") not in ("", "0"):
                raise RequestError(
                    ResponseCode.MESSAGE_ILLEGAL, "TimeDelayLevel is not supported for batch"
                )
            msgs.append(
                MessageExt(
                    topic=base.topic,
                    body=body,
                    queue_id=base.queue_id,
                    flag=flag,
                    properties={**base.properties, **props},
                    sys_flag=base.sys_flag,
                    born_timestamp=base.born_timestamp,
                    born_host=base.born_host,
                    store_host=base.store_host,
                    reconsume_times=base.reconsume_times,
                )
            )
        return msgs

    # ------------------------------------------------------------------ pull

    async def pull_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = get_str(cmd, "consumerGroup")
        topic = get_str(cmd, "topic")
        queue_id = get_int(cmd, "queueId")
        offset = get_int(cmd, "queueOffset")
        max_nums = get_int(cmd, "maxMsgNums", 32)
        sys_flag = get_int(cmd, "sysFlag", 0)
        suspend_ms = get_int(cmd, "suspendTimeoutMillis", 0)
        if not self.broker.config.broker_permission & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, "the broker pulling message is forbidden"
            )
        cfg = self.topics.get(topic)
        if cfg is None:
            raise RequestError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not cfg.perm & PERM_READ:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        if not 0 <= queue_id < cfg.read_queue_nums:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{cfg.read_queue_nums}] consumer:[{channel.peer}]",
            )
        tag_filter = TagFilter.parse(cmd.ext_fields.get("subscription"))
        if sys_flag & PULL_FLAG_COMMIT_OFFSET and self.broker.config.broker_id == 0:
            commit = get_int(cmd, "commitOffset", -1)
            if commit >= 0:
                self.broker.offsets.commit(group, topic, queue_id, commit)
        # Long polling (suspend flag) waits up to the client's timeout; without it, briefly.
        if sys_flag & PULL_FLAG_SUSPEND and self.broker.config.long_polling_enable:
            hold_s = suspend_ms / 1000
        else:
            hold_s = (
                self.broker.config.short_polling_time_mills / 1000
                if sys_flag & PULL_FLAG_SUSPEND
                else 0
            )
        deadline = time.monotonic() + hold_s
        while True:
            result = self.store.get_message(topic, queue_id, offset, max_nums, tag_filter)
            code = pull_code(result.status, offset)
            remaining = deadline - time.monotonic()
            if code != ResponseCode.PULL_NOT_FOUND or remaining <= 0 or not channel.is_open:
                break
            await self.broker.pull_hold.wait(topic, queue_id, offset, remaining)
        self.broker.offsets.commit_pull(group, topic, queue_id, result.next_begin_offset)
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else result.status.value,
            ext_fields={
                "suggestWhichBrokerId": 0,
                "nextBeginOffset": result.next_begin_offset,
                "minOffset": result.min_offset,
                "maxOffset": result.max_offset,
            },
            body=b"".join(result.messages) if result.status is GetStatus.FOUND else b"",
        )

    # ------------------------------------------------------------------ offsets

    def query_consumer_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        group, topic = get_str(cmd, "consumerGroup"), get_str(cmd, "topic")
        queue_id = get_int(cmd, "queueId")
        offset = self.broker.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
        if self.store.get_min_offset_in_queue(topic, queue_id) <= 0:
            # Nothing ever removed from this queue: a new group starts at its beginning.
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        self.broker.offsets.commit(
            get_str(cmd, "consumerGroup"),
            get_str(cmd, "topic"),
            get_int(cmd, "queueId"),
            get_int(cmd, "commitOffset"),
        )
        return cmd.response(ResponseCode.SUCCESS)

    def get_max_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.store.get_max_offset_in_queue(get_str(cmd, "topic"), get_int(cmd, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_min_offset(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.store.get_min_offset_in_queue(get_str(cmd, "topic"), get_int(cmd, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def search_offset_by_timestamp(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        offset = self.store.get_offset_in_queue_by_time(
            get_str(cmd, "topic"), get_int(cmd, "queueId"), get_int(cmd, "timestamp")
        )
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_earliest_msg_storetime(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        ts = self.store.get_earliest_message_time(get_str(cmd, "topic"), get_int(cmd, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": ts})

    # ------------------------------------------------------------------ clients

    def heart_beat(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        try:
            data: Any = json_body.loads(cmd.body) if cmd.body else {}
        except ProtocolError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"heartbeat body: {exc}") from exc
        if not isinstance(data, dict):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "heartbeat body is not an object")
        client_id = str(data.get("clientID", ""))
        channel.attributes["client_id"] = client_id
        for consumer in data.get("consumerDataSet") or []:
            if not isinstance(consumer, dict):
                continue
            group = str(consumer.get("groupName", ""))
            sub = self.broker.subscription_groups.find(group)
            # Every group gets its retry topic, which its consumers subscribe to.
            if sub is not None and sub.retry_queue_nums > 0:
                self.topics.create_system_if_absent(
                    RETRY_GROUP_TOPIC_PREFIX + group, sub.retry_queue_nums, PERM_READ | PERM_WRITE
                )
            self.broker.consumers.register(channel, client_id, consumer)
        return cmd.response(ResponseCode.SUCCESS)

    def unregister_client(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup")
        if group:
            self.broker.consumers.unregister(channel, group)
        return cmd.response(ResponseCode.SUCCESS)

    def get_consumer_list(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = get_str(cmd, "consumerGroup")
        ids = self.broker.consumers.client_ids(group)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps({"consumerIdList": ids}))

    @staticmethod
    def _lock_body(cmd: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
        try:
            data: Any = json_body.loads(cmd.body)
            group = str(data["consumerGroup"])
            client_id = str(data["clientId"])
            queues = [
                (str(q["topic"]), str(q["brokerName"]), int(q["queueId"])) for q in data["mqSet"]
            ]
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"lock body: {exc!r}") from exc
        return group, client_id, queues

    def lock_batch_mq(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = self._lock_body(cmd)
        held = self.broker.locks.try_lock_batch(group, queues, client_id)
        body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held]}
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(body))

    def unlock_batch_mq(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = self._lock_body(cmd)
        self.broker.locks.unlock_batch(group, queues, client_id)
        return cmd.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ queries

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

    # ------------------------------------------------------------------ admin

    def update_and_create_topic(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        topic = get_str(cmd, "topic")
        err = topic_error(topic)
        if err is not None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, err)
        nums_r = get_int(cmd, "readQueueNums", self.broker.config.default_topic_queue_nums)
        nums_w = get_int(cmd, "writeQueueNums", nums_r)
        if not (0 < nums_r <= 1024 and 0 < nums_w <= 1024):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "queue numbers must be 1..1024")
        self.topics.update(
            TopicConfig(
                topic_name=topic,
                read_queue_nums=nums_r,
                write_queue_nums=nums_w,
                perm=get_int(cmd, "perm", PERM_READ | PERM_WRITE),
                topic_filter_type=get_str(cmd, "topicFilterType", "SINGLE_TAG"),
                topic_sys_flag=get_int(cmd, "topicSysFlag", 0),
                order=get_bool(cmd, "order"),
            )
        )
        self.broker.register_soon()
        return cmd.response(ResponseCode.SUCCESS)

    def delete_topic(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        topic = get_str(cmd, "topic")
        self.topics.delete(topic)
        self.store.delete_topics({topic})
        self.broker.register_soon()
        return cmd.response(ResponseCode.SUCCESS)

    def get_all_topic_config(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(self.topics.wrapper()))

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
        group = get_str(cmd, "consumerGroup")
        offsets = self.broker.offsets
        table: dict[str, dict[str, int]] = {}
        for topic in sorted(self._consume_stats_topics(cmd, group)):
            cfg = self.topics.get(topic)
            if cfg is None:
                continue
            for queue_id in range(cfg.read_queue_nums):
                consumer_offset = max(offsets.query(group, topic, queue_id), 0)
                last_ms = 0
                if consumer_offset > 0:
                    # When the last consumed message was stored; the store says -1 once it is gone.
                    last_ms = self.store.get_message_store_timestamp(
                        topic, queue_id, consumer_offset - 1
                    )
                key = json_body.message_queue_key(topic, self.broker.config.broker_name, queue_id)
                table[key] = {
                    "brokerOffset": max(self.store.get_max_offset_in_queue(topic, queue_id), 0),
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": max(last_ms, 0),
                    "pullOffset": max(consumer_offset, offsets.query_pull(group, topic, queue_id)),
                }
        # No per-group get rates are kept (RocketMQ's BrokerStatsManager), so the TPS is 0.
        body = {"consumeTps": 0.0, "offsetTable": table}
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
        self.broker.subscription_groups.update(cfg)
        return cmd.response(ResponseCode.SUCCESS)

    def get_all_subscription_groups(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        return cmd.response(
            ResponseCode.SUCCESS, body=json_body.dumps(self.broker.subscription_groups.wrapper())
        )

    def delete_subscription_group(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        self.broker.subscription_groups.delete(get_str(cmd, "groupName"))
        return cmd.response(ResponseCode.SUCCESS)
