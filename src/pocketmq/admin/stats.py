"""Statistics of a cluster, as mqadmin's statsAll and brokerConsumeStats gather them: a
broker's BrokerStatsData (VIEW_BROKER_STATS_DATA, 315), the groups consuming a topic
(QUERY_TOPIC_CONSUME_BY_WHO, 300), a group's ConsumeStats (GET_CONSUME_STATS, 208) and a
broker's ConsumeStatsList (GET_BROKER_CONSUME_STATS, 317). Works against pocketmq and RocketMQ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import is_dlq_topic, is_retry_topic

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class StatsWindow:
    """A BrokerStatsItem: the sum over the window, per second, per call."""

    sum: int
    tps: float
    avgpt: float

    @classmethod
    def from_json(cls, value: Any) -> StatsWindow:
        return cls(int(value["sum"]), float(value["tps"]), float(value["avgpt"]))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """One stats item of one broker over its last minute, hour and day."""

    minute: StatsWindow
    hour: StatsWindow
    day: StatsWindow

    def day_sum(self) -> int:
        """StatsAllSubCommand.compute24HourSum: the longest window that counted something."""
        for window in (self.day, self.hour, self.minute):
            if window.sum:
                return window.sum
        return 0


async def view_broker_stats(
    client: AdminClient, addr: str, stats_name: str, stats_key: str
) -> BrokerStatsData | None:
    """A broker's stats item (TOPIC_PUT_NUMS by topic, GROUP_GET_NUMS by topic@group, ...);
    None when the broker has not counted that key."""
    fields = {"statsName": stats_name, "statsKey": stats_key}
    resp = await client.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, fields,
                             ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))  # fmt: skip
    if resp.code == ResponseCode.SYSTEM_ERROR:
        if "not exist" in (resp.remark or ""):
            return None
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}".strip())
    try:
        body = json_body.loads(resp.body)
        return BrokerStatsData(
            StatsWindow.from_json(body["statsMinute"]),
            StatsWindow.from_json(body["statsHour"]),
            StatsWindow.from_json(body["statsDay"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AdminError(f"{addr} sent a bad BrokerStatsData: {exc!r}") from exc


async def topic_consumer_groups(client: AdminClient, topic: str, masters: list[str]) -> list[str]:
    """The groups that consume ``topic`` on any of ``masters`` (queryTopicConsumeByWho)."""
    groups: set[str] = set()
    for addr in masters:
        body = await client.call_json(
            addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
        )
        try:
            groups.update(str(g) for g in body["groupList"])
        except (KeyError, TypeError) as exc:
            raise AdminError(f"{addr} sent bad groups of {topic}: {exc!r}") from exc
    return sorted(groups)


async def consume_diff(client: AdminClient, addrs: list[str], group: str, topic: str) -> int:
    """examineConsumeStats(group, topic).computeTotalDiff over the brokers, never negative."""
    diff = 0
    for addr in addrs:
        body = await client.call_json(
            addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic}
        )
        for wrapper in (body.get("offsetTable") or {}).values():
            diff += int(wrapper["brokerOffset"]) - int(wrapper["consumerOffset"])
    return max(diff, 0)


@dataclass(frozen=True, slots=True)
class TopicGroupStats:
    """One line of statsAll: a topic and one of its groups ("" with no consumer)."""

    topic: str
    group: str
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24h: int
    out_msg_24h: int


async def _sum_stats(
    client: AdminClient, masters: list[str], name: str, key: str
) -> tuple[float, int]:
    tps, total = 0.0, 0
    for addr in masters:
        data = await view_broker_stats(client, addr, name, key)
        if data is not None:
            tps += data.minute.tps
            total += data.day_sum()
    return tps, total


async def topic_stats(client: AdminClient, topic: str, active_only: bool) -> list[TopicGroupStats]:
    """StatsAllSubCommand.printTopicDetail for one topic."""
    masters = list(route_masters(await client.route(topic)).values())
    groups = await topic_consumer_groups(client, topic, masters)
    in_tps, in_24h = await _sum_stats(client, masters, "TOPIC_PUT_NUMS", topic)
    if not groups:
        if active_only and in_24h <= 0:
            return []
        return [TopicGroupStats(topic, "", 0, in_tps, 0.0, in_24h, 0)]
    lines = []
    for group in groups:
        out_tps, out_24h = await _sum_stats(client, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
        if active_only and in_24h <= 0 and out_24h <= 0:
            continue
        diff = await consume_diff(client, masters, group, topic)
        lines.append(TopicGroupStats(topic, group, diff, in_tps, out_tps, in_24h, out_24h))
    return lines


async def stats_all_topics(client: AdminClient, topic: str | None = None) -> list[str]:
    """The topics statsAll walks: every topic but retry and dead-letter ones, or one."""
    if topic is not None:
        return [topic]
    body = await client.namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    try:
        names = [str(t) for t in body["topicList"]]
    except (KeyError, TypeError) as exc:
        raise AdminError(f"the NameServer sent a bad topic list: {exc!r}") from exc
    return sorted(t for t in names if not (is_retry_topic(t) or is_dlq_topic(t)))


@dataclass(frozen=True, slots=True)
class QueueConsumeStats:
    """One queue of one group in a ConsumeStatsList."""

    topic: str
    group: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class BrokerConsumeStats:
    """GET_BROKER_CONSUME_STATS: every group's queues on one broker, with the group's consume
    TPS per topic and the broker's total diff."""

    broker_addr: str
    total_diff: int
    queues: list[QueueConsumeStats]
    consume_tps: dict[tuple[str, str], float]


async def broker_consume_stats(
    client: AdminClient, addr: str, is_order: bool = False
) -> BrokerConsumeStats:
    """fetchConsumeStatsInBroker (``is_order``: only ordered topics)."""
    body = await client.call_json(
        addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": str(is_order).lower()}
    )
    queues: list[QueueConsumeStats] = []
    tps: dict[tuple[str, str], float] = {}
    try:
        for by_group in body["consumeStatsList"]:
            for group, stats_list in by_group.items():
                for stats in stats_list:
                    for key, wrapper in stats["offsetTable"].items():
                        topic, broker_name, queue_id = json_body.parse_message_queue_key(key)
                        queues.append(QueueConsumeStats(
                            topic, str(group), broker_name, queue_id,
                            int(wrapper["brokerOffset"]), int(wrapper["consumerOffset"]),
                            int(wrapper.get("lastTimestamp", 0)),
                        ))  # fmt: skip
                        tps[(topic, str(group))] = float(stats["consumeTps"])
        queues.sort(key=lambda q: (q.topic, q.group, q.broker_name, q.queue_id))
        return BrokerConsumeStats(str(body.get("brokerAddr", addr)), int(body["totalDiff"]),
                                  queues, tps)  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdminError(f"{addr} sent a bad ConsumeStatsList: {exc!r}") from exc
