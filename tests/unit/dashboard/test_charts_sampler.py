"""The dashboard's samples and charts (no network, a fake clock)."""

from __future__ import annotations

from pocketmq.admin import AdminClient
from pocketmq.clock import FakeClock
from pocketmq.dashboard.charts import Series, line_chart
from pocketmq.dashboard.sampler import Sampler


def sampler(clock: FakeClock) -> Sampler:
    # Never connects: record() is fed directly.
    return Sampler(AdminClient("127.0.0.1:1"), clock=clock, keep=3)


def test_write_rate_is_bytes_per_second_between_samples() -> None:
    clock = FakeClock()
    s = sampler(clock)
    s.record("b:1", {"commitLogMaxOffset": "1000"})
    clock.advance(2_000)
    s.record("b:1", {"commitLogMaxOffset": "5000", "putTps": "12.5 10.0 9.0"})
    assert s.write_rate("b:1") == [(clock.now_ms() / 1000, 2000.0)]
    assert s.tps("b:1", "put") == [(clock.now_ms() / 1000, 12.5)]
    assert s.tps("b:1", "get") == []  # not reported: no point, not a zero


def test_history_is_bounded_and_a_truncated_log_is_not_negative() -> None:
    clock = FakeClock()
    s = sampler(clock)
    for offset in (100, 200, 300, 50):  # a failover truncated the log between samples
        s.record("b:1", {"commitLogMaxOffset": str(offset)})
        clock.advance(1_000)
    assert len(s.history["b:1"]) == 3
    assert [v for _, v in s.write_rate("b:1")] == [100.0, 0.0]


def test_a_bad_tps_field_is_no_point() -> None:
    s = sampler(FakeClock())
    s.record("b:1", {"putTps": "n/a"})
    assert s.tps("b:1", "put") == []


def test_chart_draws_each_series_and_escapes_names() -> None:
    svg = line_chart(
        "<broker>", [Series("a&b", [(0.0, 1.0), (10.0, 3.0)]), Series("empty", [])], unit="/s"
    )
    assert svg.count("<polyline") == 1
    assert "&lt;broker&gt;" in svg and "a&amp;b" in svg and "<broker>" not in svg
    assert ">3/s<" in svg  # the y axis is labelled with the largest value


def test_chart_waits_for_two_points() -> None:
    assert "waiting for a second sample" in line_chart("t", [Series("s", [(0.0, 1.0)])])
