"""Topic statistics across a cluster, as mqadmin's topicStatus and topicClusterList read them:
GET_TOPIC_STATS_INFO (202, TopicStatsTable) from every master of the topic's route, and the
clusters whose brokers serve the topic (route + GET_BROKER_CLUSTER_INFO).

No formatting here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import MASTER_ID


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a TopicStatsTable (MessageQueue -> TopicOffset)."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


def route_masters(route: dict[str, Any]) -> dict[str, str]:
    """Broker name -> master address of a TopicRouteData (brokers without a master left
    out)."""
    found = {}
    for data in route.get("brokerDatas") or []:
        addrs = data.get("brokerAddrs") or {}
        addr = addrs.get(str(MASTER_ID)) or addrs.get(MASTER_ID)
        if addr:
            found[str(data["brokerName"])] = str(addr)
    return dict(sorted(found.items()))


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


async def topic_clusters(client: AdminClient, topic: str) -> list[str]:
    """The clusters with a broker serving topic (TopicClusterSubCommand)."""
    route = await client.route(topic)
    names = {str(d.get("brokerName")) for d in route.get("brokerDatas") or []}
    info = await client.cluster_info()
    return sorted(c for c, members in info.clusters.items() if names & set(members))
