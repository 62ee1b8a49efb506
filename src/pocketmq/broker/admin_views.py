"""What the admin requests about topics, groups and connections read from the broker's tables,
as RocketMQ's AdminBrokerProcessor computes it: a topic's queue offsets (TopicStatsTable), a
group's consumers (ConsumerConnection), the groups consuming a topic (GroupList), and the
copy of one group's offsets to another (cloneGroupOffset). Bodies are built here as fastjson
writes RocketMQ's classes; the handlers only parse headers and answer.

No I/O here (the offset table is persisted by its own periodic flush).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pocketmq.errors import RequestError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)


def topic_stats(broker: Broker, topic: str) -> dict[str, Any]:
    """TopicStatsTable: each writable queue's min and max offset and when its last message
    was stored (0 for an empty queue).

    Raises:
        RequestError: TOPIC_NOT_EXIST, with RocketMQ's remark.
    """
    cfg = broker.topics.get(topic)
    if cfg is None:
        raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    store = broker.store
    table = {}
    for queue_id in range(cfg.write_queue_nums):
        min_offset = max(store.get_min_offset_in_queue(topic, queue_id), 0)
        max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
        last_ms = 0
        if max_offset > 0:
            last_ms = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
        key = json_body.message_queue_key(topic, broker.config.broker_name, queue_id)
        table[key] = {
            "lastUpdateTimestamp": last_ms,
            "maxOffset": max_offset,
            "minOffset": min_offset,
        }
    return {"offsetTable": table}


def consumer_connection(broker: Broker, group: str) -> dict[str, Any]:
    """ConsumerConnection of an online group: its connections, subscriptions and the consume
    type, model and start its heartbeats declared.

    Raises:
        RequestError: CONSUMER_NOT_ONLINE, with RocketMQ's remark.
    """
    info = broker.consumers.groups.get(group)
    connections = broker.consumers.connections(group)
    if info is None or not connections:
        raise RequestError(
            ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
        )
    return {
        "connectionSet": [c.to_json() for c in connections],
        "consumeFromWhere": info.consume_from_where,
        "consumeType": info.consume_type,
        "messageModel": info.message_model,
        "subscriptionTable": {t: s.data.to_json() for t, s in info.subscriptions.items()},
    }


def producer_connection(broker: Broker, group: str) -> dict[str, Any]:
    """ProducerConnection: the live producers of a group.

    Raises:
        RequestError: SYSTEM_ERROR when the group has none, as RocketMQ answers.
    """
    connections = broker.producers.connections(group)
    if connections is None:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    return {"connectionSet": [c.to_json() for c in connections]}


def groups_consuming(broker: Broker, topic: str) -> list[str]:
    """GroupList: the online groups subscribing to topic and the groups with offsets in it."""
    groups = broker.consumers.groups_of_topic(topic) | broker.offsets.groups_of_topic(topic)
    return sorted(groups)


def clone_group_offsets(
    broker: Broker, src_group: str, dest_group: str, topic: str, offline: bool
) -> list[str]:
    """Copy src_group's offsets to dest_group, in topic or (topic empty) in every topic
    src_group has offsets in; returns the topics copied. A topic this broker does not have is
    skipped, and so, unless ``offline``, is one an online src_group no longer subscribes to
    (cloneGroupOffset's rules)."""
    topics = {topic} if topic.strip() else broker.offsets.topics_of_group(src_group)
    online = broker.consumers.groups.get(src_group)
    cloned = []
    for name in sorted(topics):
        if broker.topics.get(name) is None:
            log.warning("clone offsets of %s: topic %s not on this broker", src_group, name)
            continue
        if not offline and online is not None and online.subscriptions \
                and name not in online.subscriptions:  # fmt: skip
            log.warning("clone offsets: group %s does not subscribe to %s", src_group, name)
            continue
        if broker.offsets.clone(src_group, dest_group, name):
            cloned.append(name)
    return cloned
