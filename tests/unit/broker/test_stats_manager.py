"""broker/stats.py: RocketMQ's StatsItem windows and TPS math, StoreStatsService's TPS
strings and BrokerStats' day totals, driven by a FakeClock."""

from __future__ import annotations

import datetime as dt

import pytest

from pocketmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    Protocol,
    StatsSnapshot,
)
from pocketmq.clock import FakeClock


def run_for(stats: BrokerStatsManager, clock: FakeClock, ms: int) -> None:
    """Move the clock by ``ms``, taking every sample when it falls due, as the broker's loop."""
    end = clock.now_ms() + ms
    while True:
        wait = stats.sample()
        if clock.now_ms() + wait > end:
            clock.advance(end - clock.now_ms())
            stats.sample()
            return
        clock.advance(wait)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stats(clock: FakeClock) -> BrokerStatsManager:
    s = BrokerStatsManager("ClusterX", clock)
    s.sample()  # the broker takes its first samples at start
    return s


def test_a_put_counts_once_per_batch_under_rocketmq_names_and_keys(
    stats: BrokerStatsManager,
) -> None:
    stats.on_put("T", 32, 32_000)
    stats.on_put("T", 1, 1000, Protocol.GRPC)
    nums = stats.item(TOPIC_PUT_NUMS, "T")
    size = stats.item(TOPIC_PUT_SIZE, "T")
    assert nums is not None and size is not None
    assert (nums.value, nums.times) == (33, 2)
    assert (size.value, size.times) == (33_000, 2)
    assert nums.by_protocol == [32, 1]
    broker_put = stats.item(BROKER_PUT_NUMS, "ClusterX")  # keyed by the cluster name
    assert broker_put is not None and broker_put.value == 33
    assert stats.item(TOPIC_PUT_NUMS, "other") is None
    assert stats.item("NO_SUCH_STATS", "T") is None


def test_a_get_is_keyed_topic_at_group_and_a_miss_counts_no_item(
    stats: BrokerStatsManager,
) -> None:
    stats.on_get("G", "T", 10, 5000, 3)
    stats.on_get("G", "T", 0, 0, 1)
    for name, value in ((GROUP_GET_NUMS, 10), (GROUP_GET_SIZE, 5000), (GROUP_GET_LATENCY, 3)):
        item = stats.item(name, "T@G")
        assert item is not None and (item.value, item.times) == (value, 1)
        assert item.labels == ("T", "G")
    broker_get = stats.item(BROKER_GET_NUMS, "ClusterX")
    assert broker_get is not None and broker_get.value == 10
    assert (stats.get_found_times, stats.get_miss_times) == (1, 1)
    stats.on_send_back("G", "T")
    back = stats.item(SNDBCK_PUT_NUMS, "T@G")
    assert back is not None and back.value == 1


def test_minute_window_is_seven_ten_second_snapshots(
    stats: BrokerStatsManager, clock: FakeClock
) -> None:
    stats.on_put("T", 100, 1000)  # a new item, between two samples
    run_for(stats, clock, 10_000)
    item = stats.item(TOPIC_PUT_NUMS, "T")
    assert item is not None
    # Seeded at zero one period before its first sample: 100 in 10 s.
    first = item.in_minute()
    assert (first.sum, first.tps, first.avgpt, first.times) == (100, 10.0, 100.0, 1)
    for _ in range(8):
        stats.on_put("T", 60, 600)
        run_for(stats, clock, 10_000)
    minute = item.in_minute()
    assert len(item.minute) == 7
    # The last six periods: 6 puts of 60 in 60 s.
    assert (minute.sum, minute.times) == (360, 6)
    assert minute.tps == pytest.approx(6.0)
    assert minute.avgpt == pytest.approx(60.0)
    assert stats.topic_put_tps("T") == pytest.approx(6.0)


def test_idle_minute_falls_back_to_zero_tps(stats: BrokerStatsManager, clock: FakeClock) -> None:
    stats.on_get("G", "T", 50, 500, 0)
    run_for(stats, clock, 10_000)
    assert stats.group_get_tps("G", "T") == pytest.approx(5.0)
    run_for(stats, clock, 70_000)
    assert stats.group_get_tps("G", "T") == 0.0
    assert stats.group_get_tps("G", "unknown") == 0.0


def test_hour_and_day_windows(stats: BrokerStatsManager, clock: FakeClock) -> None:
    for _ in range(12):  # 2 hours, 600 a minute
        stats.on_put("T", 6000, 1)
        run_for(stats, clock, 10 * 60_000)
    item = stats.item(TOPIC_PUT_NUMS, "T")
    assert item is not None
    hour = item.in_hour()
    assert len(item.hour) == 7
    assert hour.sum == 36_000  # the last six 10-minute periods
    assert hour.tps == pytest.approx(10.0)
    day = item.in_day()
    assert day.sum == 72_000
    assert day.tps == pytest.approx(10.0)
    for _ in range(30):
        run_for(stats, clock, 3600_000)
    assert len(item.day) == 25


def test_store_tps_strings_cover_10s_1min_10min(
    stats: BrokerStatsManager, clock: FakeClock
) -> None:
    assert stats.runtime_info()["putTps"] == "0.0 0.0 0.0"
    for _ in range(600):
        stats.on_put("T", 5, 50)
        stats.on_get("G", "T", 2, 20, 0)
        run_for(stats, clock, 1000)
    info = stats.runtime_info()
    assert [float(x) for x in info["putTps"].split(" ")] == [5.0, 5.0, 5.0]
    assert [float(x) for x in info["getTransferedTps"].split(" ")] == [2.0, 2.0, 2.0]
    assert [float(x) for x in info["getFoundTps"].split(" ")] == [1.0, 1.0, 1.0]
    assert [float(x) for x in info["getTotalTps"].split(" ")] == [1.0, 1.0, 1.0]
    assert info["msgPutTotalTodayNow"] == "3000"
    assert info["msgGetTotalTodayNow"] == "1200"
    assert info["runtime"] == "[ 0 days, 0 hours, 10 minutes, 0 seconds ]"
    # A younger window uses what it has: 10 s in, the 10 min TPS is over those 10 s.
    clock2 = FakeClock()
    young = BrokerStatsManager("C", clock2)
    young.sample()
    young.on_put("T", 30, 1)
    run_for(young, clock2, 10_000)
    assert [float(x) for x in young.runtime_info()["putTps"].split(" ")] == [3.0, 3.0, 3.0]


def test_midnight_records_day_totals(clock: FakeClock) -> None:
    start = dt.datetime(2026, 1, 1, 23, 0).timestamp()
    clock = FakeClock(int(start * 1000))
    stats = BrokerStatsManager("C", clock)
    stats.sample()
    stats.on_put("T", 7, 70)
    stats.on_get("G", "T", 3, 30, 0)
    run_for(stats, clock, 2 * 3600_000)  # past midnight
    stats.on_put("T", 1, 10)
    info = stats.runtime_info()
    assert (info["msgPutTotalTodayMorning"], info["msgPutTotalYesterdayMorning"]) == ("7", "0")
    assert (info["msgGetTotalTodayMorning"], info["msgGetTotalTodayNow"]) == ("3", "3")
    assert info["msgPutTotalTodayNow"] == "8"


def test_deleting_a_topic_or_group_drops_their_items(stats: BrokerStatsManager) -> None:
    stats.on_put("T", 1, 1)
    stats.on_put("T2", 1, 1)
    stats.on_get("G", "T", 1, 1, 0)
    stats.on_get("G2", "T2", 1, 1, 0)
    stats.on_topic_deleted("T")
    assert stats.item(TOPIC_PUT_NUMS, "T") is None
    assert stats.item(GROUP_GET_NUMS, "T@G") is None
    assert stats.item(TOPIC_PUT_NUMS, "T2") is not None
    stats.on_group_deleted("G2")
    assert stats.item(GROUP_GET_NUMS, "T2@G2") is None
    # Counting again after a deletion starts new items.
    stats.on_put("T", 2, 2)
    stats.on_get("G2", "T2", 3, 3, 0)
    again = stats.item(TOPIC_PUT_NUMS, "T")
    assert again is not None and again.value == 2
    got = stats.item(GROUP_GET_NUMS, "T2@G2")
    assert got is not None and got.value == 3
    assert stats.item(BROKER_PUT_NUMS, "ClusterX") is not None


def test_snapshot_json_is_broker_stats_item() -> None:
    assert StatsSnapshot(3, 0.5, 1.5, 2).to_json() == {"sum": 3, "tps": 0.5, "avgpt": 1.5}
