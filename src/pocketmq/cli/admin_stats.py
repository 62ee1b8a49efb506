"""``pocketmq admin stats-all`` (mqadmin statsAll: per topic and consumer group, the in and
out TPS of the last minute, the messages of the last 24 hours and the accumulation) and
``pocketmq admin broker-consume-stats`` (mqadmin brokerConsumeStats: one broker's queues of
every group). The requests are the admin library's (``admin/stats.py``).
"""

from __future__ import annotations

import datetime as dt

import click

from pocketmq import admin as admin_lib
from pocketmq.admin import stats as stats_lib
from pocketmq.cli.admin import run_admin
from pocketmq.cli.output import emit_table, json_option, progress


@click.command("stats-all")
@click.option("-t", "--topic", default=None, help="Only this topic.")
@click.option("-a", "--active", is_flag=True, help="Only topics with traffic in the last day.")
@json_option
@click.pass_obj
def stats_all(namesrv: str, topic: str | None, active: bool, as_json: bool) -> None:
    """In/out TPS and the last day's messages of every topic and consumer group."""

    async def go(c: admin_lib.AdminClient) -> list[stats_lib.TopicGroupStats]:
        lines: list[stats_lib.TopicGroupStats] = []
        topics = await stats_lib.stats_all_topics(c, topic)
        for name in progress(topics, "topics"):
            lines.extend(await stats_lib.topic_stats(c, name, active))
        return lines

    rows = [
        (s.topic, s.group if s.group else ("" if as_json else "NO_CONSUMER"), s.accumulation,
         round(s.in_tps, 2), round(s.out_tps, 2), s.in_msg_24h, s.out_msg_24h)
        for s in run_admin(namesrv, go)
    ]  # fmt: skip
    emit_table(
        ["topic", "consumer group", "accumulation", "in tps", "out tps", "in msg 24h",
         "out msg 24h"],
        rows, as_json=as_json,
    )  # fmt: skip


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms > 0 else "-"


@click.command("broker-consume-stats")
@click.option("-b", "--broker-addr", required=True, help="The broker, host:port.")
@click.option("-o", "--order", is_flag=True, help="Only ordered topics (isOrder).")
@click.option("-l", "--diff-level", type=int, default=0, show_default=True,
              help="Only queues at least this far behind.")  # fmt: skip
@click.option("--timeout-ms", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="How long to wait for the broker.")  # fmt: skip
@json_option
@click.pass_obj
def broker_consume_stats(
    namesrv: str, broker_addr: str, order: bool, diff_level: int, timeout_ms: int, as_json: bool
) -> None:
    """Every consumer group's queues on one broker, with their offsets and diff."""

    async def go(c: admin_lib.AdminClient) -> stats_lib.BrokerConsumeStats:
        c.timeout_s = timeout_ms / 1000
        return await stats_lib.broker_consume_stats(c, broker_addr, order)

    result = run_admin(namesrv, go)
    rows = [
        (q.topic, q.group, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset,
         q.diff, round(result.consume_tps.get((q.topic, q.group), 0.0), 2),
         q.last_timestamp if as_json else _when(q.last_timestamp))
        for q in result.queues
        # As mqadmin: queues behind by at least the level that a consumer has read from.
        if q.diff >= diff_level and q.last_timestamp > 0
    ]  # fmt: skip
    emit_table(
        ["topic", "group", "broker", "queue", "broker offset", "consumer offset", "diff",
         "consume tps", "last time"],
        rows, as_json=as_json, footer=f"Diff Total: {result.total_diff}",
    )  # fmt: skip
