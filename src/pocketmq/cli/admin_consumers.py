"""``pocketmq admin`` verbs about consumer groups: ``consumer-progress``, ``subscription-group``
and ``update-subscription-group``, and the two that reach a live group through its brokers,
``reset-offset-by-time`` and ``consumer-status``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from pocketmq.admin import groups
from pocketmq.cli.admin import run_admin
from pocketmq.cli.options import F, parse_epoch_ms
from pocketmq.cli.output import emit_json, emit_table, json_option, progress

# The settings update-subscription-group changes, by SubscriptionGroupConfig's JSON names.
_GROUP_COLUMNS = ("retryMaxTimes", "retryQueueNums", "consumeMessageOrderly", "consumeEnable",
                  "consumeBroadcastEnable")  # fmt: skip


@click.command("consumer-progress")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", default=None, help="Only this topic (default: all of the group's).")
@json_option
@click.pass_obj
def consumer_progress(namesrv: str, group: str, topic: str | None, as_json: bool) -> None:
    """Per queue: the broker's max offset, the group's committed offset, the lag and when the
    last consumed message was stored (GET_CONSUME_STATS on every master broker)."""
    found = run_admin(namesrv, lambda c: groups.consumer_progress(c, group, topic))
    rows = []
    for q in found:
        # Local time, as mqadmin prints it.
        last = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(q.last_timestamp_ms / 1000))
            if q.last_timestamp_ms
            else "N/A"
        )
        rows.append((q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset,
                     q.lag, last))  # fmt: skip
    columns = ["topic", "broker", "queue", "broker offset", "consumer offset", "lag", "last time"]
    total = sum(q.lag for q in found)
    emit_table(columns, rows, as_json=as_json, footer=f"total lag: {total}")


def _switch(short: str, name: str, help: str) -> Callable[[F], F]:
    """A --NAME/--no-NAME option that is None when left out (the setting keeps its value)."""
    return click.option(short, f"--{name}/--no-{name}", default=None, help=help)


@click.command("update-subscription-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@click.option(
    "-r", "--retry-max-times", type=click.IntRange(0), default=None,
    help="Redeliveries of a failed message before it goes to the group's dead-letter queue.",
)  # fmt: skip
@click.option(
    "-q", "--retry-queue-nums", type=click.IntRange(0, 1024), default=None,
    help="Queues of the group's retry topic; 0 turns retries off.",
)  # fmt: skip
@_switch(
    "-o",
    "orderly",
    "Orderly consumption: 5.x clients get one message of a message group at a time.",
)
@_switch(
    "-s",
    "consume-enable",
    "consumeEnable: kept for RocketMQ tools; pocketmq does not refuse a disabled group yet.",
)
@_switch(
    "-d",
    "broadcast",
    "consumeBroadcastEnable: kept for RocketMQ tools; pocketmq does not enforce it yet.",
)
@json_option
@click.pass_obj
def update_subscription_group(
    namesrv: str,
    group: str,
    cluster: str | None,
    retry_max_times: int | None,
    retry_queue_nums: int | None,
    orderly: bool | None,
    consume_enable: bool | None,
    broadcast: bool | None,
    as_json: bool,
) -> None:
    """Create or update a consumer group on every master broker (of a cluster).

    Options left out keep the group's current value on each broker, RocketMQ's default for a
    new group; mqadmin updateSubGroup would reset them to its own defaults instead.
    """
    if not group.strip():
        raise click.BadParameter("the group name is blank", param_hint="'-g' / '--group'")
    values = (retry_max_times, retry_queue_nums, orderly, consume_enable, broadcast)
    changes = {k: v for k, v in zip(_GROUP_COLUMNS, values, strict=True) if v is not None}
    done = run_admin(
        namesrv, lambda c: groups.update_subscription_group(c, group, changes, cluster)
    )
    _emit_groups(group, done, as_json)


def _emit_groups(group: str, configs: dict[str, dict[str, Any]], as_json: bool) -> None:
    rows = [(addr, group, *(cfg.get(k) for k in _GROUP_COLUMNS)) for addr, cfg in configs.items()]
    emit_table(["broker", "group", *_GROUP_COLUMNS], rows, as_json=as_json)


@click.command("subscription-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@json_option
@click.pass_obj
def subscription_group(namesrv: str, group: str, cluster: str | None, as_json: bool) -> None:
    """A consumer group's settings on each master broker that has it (--json: broker address
    -> RocketMQ's SubscriptionGroupConfig)."""
    found = run_admin(namesrv, lambda c: groups.subscription_groups(c, group, cluster))
    if as_json:
        emit_json(found)
        return
    _emit_groups(group, found, False)


@click.command("reset-offset-by-time")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True)
@click.option(
    "-s", "--timestamp", required=True,
    help="Epoch milliseconds, or 'now'; the group restarts at the first message stored then.",
)  # fmt: skip
@click.option(
    "-f/-F", "--force/--no-force", default=True,
    help="Also move the group forward (default); --no-force only moves it back.",
)  # fmt: skip
@json_option
@click.pass_obj
def reset_offset_by_time(
    namesrv: str, group: str, topic: str, timestamp: str, force: bool, as_json: bool
) -> None:
    """Move a consumer group's offsets in a topic to a time, on every broker of the topic;
    live consumers restart there at once, and with none online the offsets are committed
    directly (as mqadmin falls back to). Prints the new offsets."""
    at_ms = parse_epoch_ms(timestamp, "-s")
    table = run_admin(
        namesrv,
        lambda c: groups.reset_offset_by_time(
            c, group, topic, at_ms, force=force,
            progress=lambda addrs: progress(addrs, f"resetting {group} on {len(addrs)} brokers"),
        ),
    )  # fmt: skip
    rows = [(broker, queue_id, offset) for (broker, queue_id), offset in table.items()]
    emit_table(["broker", "queue", "offset"], rows, as_json=as_json)


@click.command("delete-subscription-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-b", "--broker-addr", default=None, help="Only on this broker.")
@click.option(
    "-c", "--cluster", default=None,
    help="On the cluster's masters, with the group's retry and dead-letter topics.",
)  # fmt: skip
@json_option
@click.pass_obj
def delete_subscription_group(
    namesrv: str, group: str, broker_addr: str | None, cluster: str | None, as_json: bool
) -> None:
    """Delete a consumer group's settings (mqadmin deleteSubGroup): on one broker, on every
    master of a cluster (then also its %RETRY% and %DLQ% topics), or on every master."""
    done, problems = run_admin(
        namesrv,
        lambda c: groups.delete_subscription_group(c, group, broker=broker_addr, cluster=cluster),
    )
    emit_table(["broker", "group"], [(addr, group) for addr in done], as_json=as_json,
               footer="\n".join(f"not deleted: {p}" for p in problems) or None)  # fmt: skip


@click.command("consumer-status")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--client-id", default=None, help="Only this consumer.")
@json_option
@click.pass_obj
def consumer_status(namesrv: str, group: str, client_id: str | None, as_json: bool) -> None:
    """Each live consumer's running info as its client reports it (--json: client id ->
    RocketMQ's ConsumerRunningInfo)."""
    found = run_admin(namesrv, lambda c: groups.consumer_status(c, group, client_id))
    if as_json:
        emit_json(found)
        return
    rows = []
    for cid, info in found.items():
        props = info.get("properties", {}) if isinstance(info, dict) else {}
        subs = info.get("subscriptionSet", []) if isinstance(info, dict) else []
        queues = info.get("mqTable", {}) if isinstance(info, dict) else {}
        topics = sorted({str(s.get("topic")) for s in subs if isinstance(s, dict)})
        # ConsumerRunningInfo's property names (PROP_CONSUME_TYPE is RocketMQ's constant).
        rows.append((cid, props.get("PROP_CONSUME_TYPE", "-"), props.get("messageModel", "-"),
                     ", ".join(topics), len(queues)))  # fmt: skip
    columns = ["client id", "consume type", "message model", "topics", "queues held"]
    emit_table(columns, rows, as_json=False, title=f"consumers of {group}")
