"""The broker's statistics, kept as RocketMQ's BrokerStatsManager keeps them.

- Stats sets by RocketMQ's names and keys: TOPIC_PUT_NUMS and TOPIC_PUT_SIZE per ``topic``;
  GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY and SNDBCK_PUT_NUMS per ``topic@group``;
  BROKER_PUT_NUMS and BROKER_GET_NUMS per cluster name. Each item keeps a cumulative value and
  call count (StatsItem) and three windows of snapshots (CallSnapshot): every 10 s (7 kept:
  the last minute), every 10 min (7: the last hour) and every hour (25: the last day). A
  window's sum, TPS and average per call (StatsSnapshot) come from its first and last
  snapshot, as StatsItem.computeStatsData computes them.
- The store-level counters of RocketMQ's StoreStatsService and BrokerStats that
  GET_BROKER_RUNTIME_INFO prints: every put and every message a pull or pop handed out,
  sampled each second (600 kept) for ``putTps``/``getTransferedTps``-style "10 s, 1 min,
  10 min" TPS strings, and the totals at the last two local midnights.
- Cumulative totals of the topic and group items by (protocol, kind), which the Prometheus
  collector (``broker/metrics.py``) reads at scrape time: there is one counting point, this
  module. The kind of a put is its message type (RocketMQ 5's ``message_type`` label); gets
  have none (their labels follow from the topic and group).

Counting is one call per put batch or pull answer (``on_put``, ``on_get``), never per message.
Sampling is driven by ``sample`` (the broker calls it when due; tests call it after moving a
FakeClock). No I/O here: the clock is injected.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass
from enum import IntEnum

from pocketmq.clock import Clock
from pocketmq.protocol.topic_attributes import TopicMessageType

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY,
               SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS)  # fmt: skip

SECOND_MS = 1_000
MINUTE_SAMPLE_MS = 10 * SECOND_MS  # StatsItem.samplingInSeconds
HOUR_SAMPLE_MS = 10 * 60 * SECOND_MS  # samplingInMinutes
DAY_SAMPLE_MS = 60 * 60 * SECOND_MS  # samplingInHour
# StoreStatsService: one sample a second, ten minutes of them.
SECOND_SAMPLES_KEPT = 600
# "10 s, 1 min, 10 min", the three TPS of putTps and its siblings.
TPS_SPANS_S = (10, 60, 600)


class Protocol(IntEnum):
    """Which edge a request came through (the ``protocol_type`` label of the metrics)."""

    REMOTING = 0
    GRPC = 1


def stats_key(topic: str, group: str) -> str:
    """BrokerStatsManager.buildStatsKey(topic, group)."""
    return f"{topic}@{group}"


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window of an item (RocketMQ's StatsSnapshot): the value added, per second, per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0

    def to_json(self) -> dict[str, float | int]:
        """A BrokerStatsItem as fastjson writes it."""
        return {"sum": self.sum, "tps": self.tps, "avgpt": self.avgpt}


# (timestamp ms, times, value): RocketMQ's CallSnapshot.
_Sample = tuple[int, int, int]


def _window(samples: deque[_Sample]) -> StatsSnapshot:
    if not samples:
        return StatsSnapshot()
    first, last = samples[0], samples[-1]
    total = last[2] - first[2]
    span_ms = last[0] - first[0]
    times = last[1] - first[1]
    return StatsSnapshot(
        sum=total,
        tps=total * 1000.0 / span_ms if span_ms > 0 else 0.0,
        avgpt=total / times if times > 0 else 0.0,
        times=times,
    )


class StatsItem:
    """One key of a stats set: cumulative value and calls, and its three windows."""

    __slots__ = ("by_labels", "day", "hour", "labels", "minute", "times", "value")

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.value = 0
        self.times = 0
        # The value split by (Protocol, kind): what the metrics report cumulatively.
        self.by_labels: dict[tuple[int, str], int] = {}
        self.labels = labels
        self.minute: deque[_Sample] = deque(maxlen=7)
        self.hour: deque[_Sample] = deque(maxlen=7)
        self.day: deque[_Sample] = deque(maxlen=25)

    def add(
        self, value: int, times: int = 1, protocol: int = Protocol.REMOTING, kind: str = ""
    ) -> None:
        self.value += value
        self.times += times
        key = (protocol, kind)
        self.by_labels[key] = self.by_labels.get(key, 0) + value

    @property
    def by_protocol(self) -> list[int]:
        """The value split by Protocol (remoting, gRPC)."""
        split = [0, 0]
        for (protocol, _), value in self.by_labels.items():
            split[protocol] += value
        return split

    def sample(self, window: deque[_Sample], now_ms: int, period_ms: int) -> None:
        """A snapshot into ``window``; a new item's first one starts from zero one period
        before, as RocketMQ seeds an empty list."""
        if not window:
            window.append((now_ms - period_ms, 0, 0))
        window.append((now_ms, self.times, self.value))

    def in_minute(self) -> StatsSnapshot:
        return _window(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return _window(self.hour)

    def in_day(self) -> StatsSnapshot:
        return _window(self.day)


class StatsItemSet:
    """The items of one stats name, by key (RocketMQ's StatsItemSet)."""

    __slots__ = ("items", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def item(self, key: str, *labels: str) -> StatsItem:
        found = self.items.get(key)
        if found is None:
            found = self.items[key] = StatsItem(labels or (key,))
        return found

    def sample(self, period: str, now_ms: int, period_ms: int) -> None:
        for item in self.items.values():
            item.sample(getattr(item, period), now_ms, period_ms)

    def drop(self, keep: dict[str, StatsItem]) -> None:
        self.items = keep


@dataclass(frozen=True, slots=True)
class DayTotals:
    """BrokerStats: the put and get totals recorded at the last two local midnights."""

    put_yesterday_morning: int = 0
    put_today_morning: int = 0
    get_yesterday_morning: int = 0
    get_today_morning: int = 0


def _next_local_midnight_ms(now_ms: int) -> int:
    today = dt.datetime.fromtimestamp(now_ms / 1000).date()
    midnight = dt.datetime.combine(today + dt.timedelta(days=1), dt.time())
    return int(midnight.timestamp() * 1000)


class BrokerStatsManager:
    def __init__(self, cluster_name: str, clock: Clock) -> None:
        self.cluster_name = cluster_name
        self.clock = clock
        self.sets = {name: StatsItemSet(name) for name in STATS_NAMES}
        self._topic_put_nums = self.sets[TOPIC_PUT_NUMS]
        self._topic_put_size = self.sets[TOPIC_PUT_SIZE]
        self._group_get_nums = self.sets[GROUP_GET_NUMS]
        self._group_get_size = self.sets[GROUP_GET_SIZE]
        self._group_get_latency = self.sets[GROUP_GET_LATENCY]
        # The items a put or a get adds to, found with one lookup on the hot path.
        self._put_items: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._get_items: dict[tuple[str, str], tuple[StatsItem, StatsItem, StatsItem]] = {}
        self._broker_put = self.sets[BROKER_PUT_NUMS].item(cluster_name)
        self._broker_get = self.sets[BROKER_GET_NUMS].item(cluster_name)
        self.boot_timestamp_ms = clock.now_ms()
        # StoreStatsService's counters: every message stored (producer sends, retries,
        # dead letters, replies) and every message handed to a consumer; pulls and pops
        # that found something, and those that found nothing.
        self.put_total = 0
        self.put_size_total = 0
        self.get_transferred_total = 0
        self.get_found_times = 0
        self.get_miss_times = 0
        # (timestamp ms, put_total, get_transferred_total, get_found_times, get_miss_times)
        self._seconds: deque[tuple[int, int, int, int, int]] = deque(maxlen=SECOND_SAMPLES_KEPT + 1)
        self.days = DayTotals()
        now = self.boot_timestamp_ms
        # RocketMQ's schedules start at once (initial delay 0).
        self._next_second = now
        self._next_minute = now
        self._next_hour = now
        self._next_day = now
        self._next_midnight = _next_local_midnight_ms(now)

    # ------------------------------------------------------------------ counting (hot path)

    def on_put(
        self, topic: str, nums: int, size: int, protocol: int = Protocol.REMOTING,
        message_type: str = TopicMessageType.NORMAL, times: int = 1,
    ) -> None:  # fmt: skip
        """A producer's ``times`` puts of ``nums`` messages of one type in all, ``size``
        bytes (SendMessageProcessor: incTopicPutNums, incTopicPutSize, incBrokerPutNums, once
        a put)."""
        items = self._put_items.get(topic)
        if items is None:
            items = self._put_items[topic] = (
                self._topic_put_nums.item(topic), self._topic_put_size.item(topic)
            )  # fmt: skip
        items[0].add(nums, times, protocol, message_type)
        items[1].add(size, times, protocol, message_type)
        self._broker_put.add(nums, times)
        self.put_total += nums
        self.put_size_total += size

    def on_store(self, nums: int, size: int) -> None:
        """A put the broker made for itself (a retry, a dead letter, a reply): the store's
        totals count it, the topic stats do not."""
        self.put_total += nums
        self.put_size_total += size

    def on_get(
        self, group: str, topic: str, nums: int, size: int, latency_ms: int,
        protocol: int = Protocol.REMOTING,
    ) -> None:  # fmt: skip
        """One pull or pop answer that handed out ``nums`` messages of ``topic`` to ``group``
        (PullMessageProcessor: incGroupGetNums, incGroupGetSize, incBrokerGetNums,
        incGroupGetLatency); ``nums`` 0 is a miss."""
        if nums <= 0:
            self.get_miss_times += 1
            return
        items = self._get_items.get((topic, group))
        if items is None:
            key = stats_key(topic, group)
            items = self._get_items[(topic, group)] = (
                self._group_get_nums.item(key, topic, group),
                self._group_get_size.item(key, topic, group),
                self._group_get_latency.item(key, topic, group),
            )
        items[0].add(nums, 1, protocol)
        items[1].add(size, 1, protocol)
        items[2].add(latency_ms, 1, protocol)
        self._broker_get.add(nums, 1)
        self.get_transferred_total += nums
        self.get_found_times += 1

    def on_send_back(self, group: str, topic: str) -> None:
        """A consumer sent a message of ``topic`` back (incSendBackNums)."""
        self.sets[SNDBCK_PUT_NUMS].item(f"{topic}@{group}", topic, group).add(1)

    # ------------------------------------------------------------------ reading

    def item(self, name: str, key: str) -> StatsItem | None:
        """BrokerStatsManager.getStatsItem: None for an unknown name or key."""
        found = self.sets.get(name)
        return None if found is None else found.items.get(key)

    def group_get_tps(self, group: str, topic: str) -> float:
        """tpsGroupGetNums: the group's messages per second from the topic, last minute."""
        found = self._group_get_nums.items.get(stats_key(topic, group))
        return 0.0 if found is None else found.in_minute().tps

    def topic_put_tps(self, topic: str) -> float:
        found = self._topic_put_nums.items.get(topic)
        return 0.0 if found is None else found.in_minute().tps

    def _tps(self, column: int, span_s: int) -> float:
        # StoreStatsService prints "" until the whole span is sampled, which makes mqadmin's
        # clusterList fail to parse it; a younger broker gives the TPS of what it has seen.
        samples = self._seconds
        if len(samples) < 2:
            return 0.0
        last, before = samples[-1], samples[-min(span_s + 1, len(samples))]
        return (last[column] - before[column]) * 1000.0 / (last[0] - before[0])

    def tps_string(self, column: int) -> str:
        """ "<10 s> <1 min> <10 min>" TPS of a store counter, as putTps is printed."""
        return " ".join(repr(self._tps(column, span)) for span in TPS_SPANS_S)

    def runtime_info(self) -> dict[str, str]:
        """The StoreStatsService and BrokerStats keys of GET_BROKER_RUNTIME_INFO."""
        now = self.clock.now_ms()
        up_s = max(now - self.boot_timestamp_ms, 0) // 1000
        days, rest = divmod(up_s, 86400)
        total_times = self.put_total or 1
        get_total = " ".join(repr(self._tps(3, s) + self._tps(4, s)) for s in TPS_SPANS_S)
        return {
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, "
            f"{rest % 60} seconds ]",
            "putMessageTimesTotal": str(total_times),
            "putMessageSizeTotal": str(self.put_size_total),
            "putMessageAverageSize": repr(self.put_size_total / total_times),
            "putTps": self.tps_string(1),
            "getTransferedTps": self.tps_string(2),
            "getFoundTps": self.tps_string(3),
            "getMissTps": self.tps_string(4),
            "getTotalTps": get_total,
            "msgPutTotalYesterdayMorning": str(self.days.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.days.put_today_morning),
            "msgPutTotalTodayNow": str(self.put_total),
            "msgGetTotalYesterdayMorning": str(self.days.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.days.get_today_morning),
            "msgGetTotalTodayNow": str(self.get_transferred_total),
        }

    # ------------------------------------------------------------------ sampling

    def sample(self) -> int:
        """Take every snapshot that is due; returns ms until the next one is."""
        now = self.clock.now_ms()
        if now >= self._next_second:
            self._seconds.append((now, self.put_total, self.get_transferred_total,
                                  self.get_found_times, self.get_miss_times))  # fmt: skip
            self._next_second = now + SECOND_MS
        if now >= self._next_minute:
            for stats in self.sets.values():
                stats.sample("minute", now, MINUTE_SAMPLE_MS)
            self._next_minute = now + MINUTE_SAMPLE_MS
        if now >= self._next_hour:
            for stats in self.sets.values():
                stats.sample("hour", now, HOUR_SAMPLE_MS)
            self._next_hour = now + HOUR_SAMPLE_MS
        if now >= self._next_day:
            for stats in self.sets.values():
                stats.sample("day", now, DAY_SAMPLE_MS)
            self._next_day = now + DAY_SAMPLE_MS
        if now >= self._next_midnight:
            self.days = DayTotals(
                put_yesterday_morning=self.days.put_today_morning,
                put_today_morning=self.put_total,
                get_yesterday_morning=self.days.get_today_morning,
                get_today_morning=self.get_transferred_total,
            )
            self._next_midnight = _next_local_midnight_ms(now)
        return max(min(self._next_second, self._next_minute, self._next_hour, self._next_day,
                       self._next_midnight) - now, 1)  # fmt: skip

    # ------------------------------------------------------------------ deletions

    def on_topic_deleted(self, topic: str) -> None:
        """onTopicDeleted: the topic's items go, and every topic@group item of it."""
        prefix = topic + "@"
        self._put_items.pop(topic, None)
        self._get_items = {k: v for k, v in self._get_items.items() if k[0] != topic}
        for stats in self.sets.values():
            if stats.name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
                continue
            stats.drop(
                {k: v for k, v in stats.items.items() if k != topic and not k.startswith(prefix)}
            )

    def on_group_deleted(self, group: str) -> None:
        """onGroupDeleted: every topic@group item of the group goes."""
        suffix = "@" + group
        self._get_items = {k: v for k, v in self._get_items.items() if k[1] != group}
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY, SNDBCK_PUT_NUMS):
            stats = self.sets[name]
            stats.drop({k: v for k, v in stats.items.items() if not k.endswith(suffix)})
