"""Statistics requests (AdminBrokerProcessor): VIEW_BROKER_STATS_DATA (315, a BrokerStatsData
of one stats item) and GET_BROKER_CONSUME_STATS (317, a ConsumeStatsList of every group), and
the ConsumeStats body GET_CONSUME_STATS (208) shares with 317. The numbers come from
``broker/stats.py``; nothing is counted here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pocketmq.errors import RequestError
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def consume_stats(
    broker: Broker, group: str, topics: Iterable[str], *, by_write_queues: bool = False
) -> dict[str, Any] | None:
    """A ConsumeStats of ``group`` over ``topics`` (fastjson's field names: ``consumeTps``, the
    sum of tpsGroupGetNums over the topics, and ``offsetTable`` by MessageQueue), or None when
    none of the topics exists. 208 walks each topic's read queues, 317 its write queues, as
    RocketMQ's two handlers do."""
    store, offsets = broker.store, broker.offsets
    table: dict[str, dict[str, int]] = {}
    tps = 0.0
    found = False
    for topic in sorted(topics):
        cfg = broker.topics.get(topic)
        if cfg is None:
            continue
        found = True
        nums = cfg.write_queue_nums if by_write_queues else cfg.read_queue_nums
        for queue_id in range(nums):
            consumer_offset = max(offsets.query(group, topic, queue_id), 0)
            last_ms = 0
            if consumer_offset > 0:
                # When the last consumed message was stored; the store says -1 once it is gone.
                last_ms = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
            key = json_body.message_queue_key(topic, broker.config.broker_name, queue_id)
            table[key] = {
                "brokerOffset": max(store.get_max_offset_in_queue(topic, queue_id), 0),
                "consumerOffset": consumer_offset,
                "lastTimestamp": max(last_ms, 0),
                "pullOffset": max(consumer_offset, offsets.query_pull(group, topic, queue_id)),
            }
        tps += broker.stats.group_get_tps(group, topic)
    return {"consumeTps": tps, "offsetTable": table} if found else None


def total_diff(stats: dict[str, Any]) -> int:
    """ConsumeStats.computeTotalDiff."""
    return sum(w["brokerOffset"] - w["consumerOffset"] for w in stats["offsetTable"].values())


class StatsHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
        }

    def view_broker_stats_data(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        name = get_str(cmd, "statsName")
        key = get_str(cmd, "statsKey")
        item = self.broker.stats.item(name, key)
        if item is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        body = {
            "statsDay": item.in_day().to_json(),
            "statsHour": item.in_hour().to_json(),
            "statsMinute": item.in_minute().to_json(),
        }
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(body))

    def get_broker_consume_stats(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        is_order = fields.java_boolean(cmd, "isOrder")
        broker = self.broker
        groups: list[dict[str, list[dict[str, Any]]]] = []
        diff = 0
        for group in sorted(broker.subscription_groups.table):
            online = broker.consumers.groups.get(group)
            subscribed = online.subscriptions if online is not None else {}
            per_topic: list[dict[str, Any]] = []
            for topic in sorted(broker.offsets.topics_of_group(group)):
                cfg = broker.topics.get(topic)
                if cfg is None or (is_order and not cfg.order):
                    continue
                # An online group's topics it no longer subscribes to are left out.
                if subscribed and topic not in subscribed:
                    continue
                stats = consume_stats(broker, group, [topic], by_write_queues=True)
                if stats is not None:
                    diff += total_diff(stats)
                    per_topic.append(stats)
            groups.append({group: per_topic})
        body = {
            "brokerAddr": broker.config.broker_addr,
            "consumeStatsList": groups,
            "totalDiff": diff,
        }
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps_object_keys(body))
