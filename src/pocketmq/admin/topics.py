"""Topics: list, route, create/update on the master brokers, delete, and the NameServer's
system and unit topic lists (mqadmin topicList, topicRoute, updateTopic, deleteTopic).

No formatting here; functions take an AdminClient and return parsed values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY, PERM_READ_WRITE


def _topic_list(body: Any, what: str) -> list[str]:
    """A TopicList body's topics, sorted."""
    try:
        return sorted(str(t) for t in body["topicList"])
    except (KeyError, TypeError) as exc:
        raise AdminError(f"the NameServer sent a bad {what}: {exc!r}") from exc


async def topic_list(client: AdminClient) -> list[str]:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the NameServer routes."""
    body = await client.namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    return _topic_list(body, "topic list")


async def topics_of_cluster(client: AdminClient, cluster: str) -> list[str]:
    """GET_TOPICS_BY_CLUSTER: the topics with queues on a cluster's brokers."""
    body = await client.namesrv_json(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
    return _topic_list(body, "topic list")


@dataclass(frozen=True, slots=True)
class SystemTopics:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS: the cluster and broker names (each a topic a broker
    serves), and one broker's address (None when no broker is registered)."""

    topics: list[str]
    broker_addr: str | None


async def system_topics(client: AdminClient) -> SystemTopics:
    body = await client.namesrv_json(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    addr = body.get("brokerAddr") if isinstance(body, dict) else None
    return SystemTopics(_topic_list(body, "system topic list"), str(addr) if addr else None)


# The NameServer's unit topic lists, by the name the CLI gives them.
UNIT_LISTS = {
    "unit": RequestCode.GET_UNIT_TOPIC_LIST,
    "unit-sub": RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
    "unit-sub-not-unit": RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
}


async def unit_topics(client: AdminClient, kind: str) -> list[str]:
    """One of the NameServer's unit topic lists (see UNIT_LISTS)."""
    return _topic_list(await client.namesrv_json(UNIT_LISTS[kind]), f"{kind} topic list")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSettings:
    """What UPDATE_AND_CREATE_TOPIC sets (TopicConfig's fields)."""

    topic: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_READ_WRITE
    order: bool = False
    # mqadmin's attribute changes: "+message.type=TRANSACTION,-key" ("" for none).
    attributes: str = ""

    def header(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "defaultTopic": AUTO_CREATE_TOPIC_KEY,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": self.order,
            **({"attributes": self.attributes} if self.attributes else {}),
        }


async def update_topic(
    client: AdminClient, settings: TopicSettings, cluster: str | None = None
) -> list[str]:
    """Create or update a topic on every master (of a cluster); returns their addresses."""
    masters = await client.master_addrs(cluster)
    for addr in masters:
        await client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, settings.header())
    return masters


async def delete_topic(client: AdminClient, topic: str, cluster: str | None = None) -> list[str]:
    """Delete a topic on every master (of a cluster), then its route on each NameServer;
    returns the addresses it was deleted at (brokers, then NameServers)."""
    done = await client.master_addrs(cluster)
    for addr in done:
        await client.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
    fields = {"topic": topic, **({"clusterName": cluster} if cluster else {})}
    for addr in client.namesrv_addrs:
        await client.call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields)
    return done + client.namesrv_addrs


async def topic_clusters(client: AdminClient, topic: str) -> list[str]:
    """The clusters whose brokers serve a topic (mqadmin topicClusterList): the route's
    broker names looked up in the cluster info."""
    route, info = await client.route(topic), await client.cluster_info()
    names = {str(q.get("brokerName")) for q in route.get("queueDatas", [])}
    return sorted(c for c, brokers in info.clusters.items() if names & set(brokers))


def route_rows(route: dict[str, Any]) -> list[tuple[str, str, str, int, int, int]]:
    """A TopicRouteData as rows: (broker name, broker id, address, read queues, write
    queues, perm), one per broker address of each queue data."""
    addrs = {str(b["brokerName"]): b.get("brokerAddrs", {}) for b in route.get("brokerDatas", [])}
    rows = []
    try:
        for q in route.get("queueDatas", []):
            name = str(q["brokerName"])
            for bid, addr in sorted(addrs.get(name, {}).items(), key=lambda kv: int(kv[0])):
                rows.append((name, str(bid), str(addr), int(q["readQueueNums"]),
                             int(q["writeQueueNums"]), int(q["perm"])))  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdminError(f"the NameServer sent a bad route: {exc!r}") from exc
    return rows
