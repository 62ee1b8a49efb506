"""Topic statistics across a cluster, as mqadmin's topicStatus and topicClusterList read them:
GET_TOPIC_STATS_INFO (202, TopicStatsTable) from every master of the topic's route, and the
clusters whose brokers serve the topic (route + GET_BROKER_CLUSTER_INFO).

No formatting here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a TopicStatsTable (MessageQueue -> TopicOffset)."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


async def topic_status(client: AdminClient, topic: str) -> list[QueueStats]:
    """Every queue of topic on every master of its route, by broker name and queue id.

    Raises:
        AdminError: no route, a broker's refusal, or a malformed answer.
    """
    masters = route_masters(await client.route(topic))
    if not masters:
        raise AdminError(f"no master broker serves the topic {topic}")
    out = []
    for addr in masters.values():
        body = await client.call_json(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        try:
            for key, value in body["offsetTable"].items():
                _, broker_name, queue_id = json_body.parse_message_queue_key(key)
                out.append(QueueStats(
                    broker_name, queue_id, int(value["minOffset"]), int(value["maxOffset"]),
                    int(value["lastUpdateTimestamp"]),
                ))  # fmt: skip
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdminError(f"{addr} sent a bad topic stats body: {exc!r}") from exc
    return sorted(out, key=lambda q: (q.broker_name, q.queue_id))
