"""``pocketmq admin`` verbs over the broker admin codes mqadmin uses for topics, groups and
broker settings: topic-status (202), consumer-connection (203),
producer-connection (204), topic-consumed-by (300), clone-group-offset (314),
get-broker-config (26), update-broker-config (25), check-msg-send-rt and cluster-rt
(310). The requests are the admin library's; this module parses options and prints (tables,
or ``--json``).
"""

from __future__ import annotations

import math
import time

import click

from pocketmq import admin as admin_lib
from pocketmq.admin import (
    broker_config,
    connections,
    offsets_clone,
    route_masters,
    send_rt,
    topic_stats,
)
from pocketmq.cli.admin import run_admin
from pocketmq.cli.output import emit_json, emit_table, json_option, progress
from pocketmq.protocol.codes import RequestCode


def _time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _half_up(ms: float) -> int:
    """Rounded half up, as clusterRT's tlog lines are (Python's round() goes half to even)."""
    return math.floor(ms + 0.5)


def _emit_connections(conns: list[connections.ClientConnection], as_json: bool, title: str) -> None:
    rows = [(x.client_id, x.client_addr, x.language, x.version) for x in conns]
    emit_table(["clientId", "clientAddr", "language", "version"], rows, as_json=as_json,
               title=title)  # fmt: skip


@click.command("topic-status")
@click.option("-t", "--topic", required=True)
@json_option
@click.pass_obj
def topic_status(namesrv: str, topic: str, as_json: bool) -> None:
    """Each queue of a topic on every broker: min and max offset, last store time."""
    queues = run_admin(namesrv, lambda c: topic_stats.topic_status(c, topic))
    rows = [(q.broker_name, q.queue_id, q.min_offset, q.max_offset,
             q.last_update_timestamp if as_json else _time(q.last_update_timestamp))
            for q in queues]  # fmt: skip
    total = sum(q.max_offset - q.min_offset for q in queues)
    emit_table(["broker", "queue", "minOffset", "maxOffset", "lastUpdated"], rows,
               as_json=as_json, footer=f"messages held: {total}")  # fmt: skip


@click.command("consumer-connection")
@click.option("-g", "--group", required=True, help="Consumer group.")
@json_option
@click.pass_obj
def consumer_connection(namesrv: str, group: str, as_json: bool) -> None:
    """A consumer group's live connections and subscriptions."""
    cc = run_admin(namesrv, lambda c: connections.consumer_connection(c, group))
    if as_json:
        emit_json({
            "connections": [
                {"clientId": x.client_id, "clientAddr": x.client_addr,
                 "language": x.language, "version": x.version}
                for x in cc.connections
            ],
            "subscriptions": cc.subscriptions, "consumeType": cc.consume_type,
            "messageModel": cc.message_model, "consumeFromWhere": cc.consume_from_where,
        })  # fmt: skip
        return
    _emit_connections(cc.connections, False, f"consumers of {group}")
    emit_table(["topic", "subExpression", "type"],
               [(t, s.get("subString"), s.get("expressionType"))
                for t, s in cc.subscriptions.items()], as_json=False,
               footer=f"consumeType {cc.consume_type}, messageModel {cc.message_model}, "
                      f"consumeFromWhere {cc.consume_from_where}")  # fmt: skip


@click.command("producer-connection")
@click.option("-g", "--group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the producers send to.")
@json_option
@click.pass_obj
def producer_connection(namesrv: str, group: str, topic: str, as_json: bool) -> None:
    """A producer group's live connections, as the brokers of one of its topics see them."""
    conns = run_admin(namesrv, lambda c: connections.producer_connection(c, group, topic))
    _emit_connections(conns, as_json, f"producers of {group}")


@click.command("topic-consumed-by")
@click.option("-t", "--topic", required=True)
@json_option
@click.pass_obj
def topic_consumed_by(namesrv: str, topic: str, as_json: bool) -> None:
    """The groups consuming a topic: online subscribers and groups with offsets in it."""

    async def go(c: admin_lib.AdminClient) -> list[str]:
        groups: set[str] = set()
        for addr in route_masters(await c.route(topic)).values():
            body = await c.call_json(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            try:
                groups.update(str(g) for g in body["groupList"])
            except (KeyError, TypeError) as exc:
                raise admin_lib.AdminError(f"{addr} sent a bad group list: {exc!r}") from exc
        return sorted(groups)

    emit_table(["group"], [(g,) for g in run_admin(namesrv, go)], as_json=as_json)


@click.command("clone-group-offset")
@click.option("-s", "--src-group", required=True, help="The group whose offsets are copied.")
@click.option("-d", "--dest-group", required=True, help="The group that gets them.")
@click.option("-t", "--topic", required=True)
@click.option(
    "-o", "--offline", is_flag=True,
    help="Copy even if the source group is online and does not subscribe to the topic.",
)  # fmt: skip
@json_option
@click.pass_obj
def clone_group_offset(
    namesrv: str, src_group: str, dest_group: str, topic: str, offline: bool, as_json: bool
) -> None:
    """Give a group another group's offsets in a topic, on every broker."""
    done = run_admin(namesrv, lambda c: offsets_clone.clone_group_offset(
        c, src_group, dest_group, topic, offline))  # fmt: skip
    emit_table(["broker", "result"], sorted(done.items()), as_json=as_json)


def _targets(broker_addr: str | None, cluster: str | None) -> None:
    if (broker_addr is None) == (cluster is None):
        raise click.UsageError("give either -b BROKER_ADDR or -c CLUSTER")


@click.command("get-broker-config")
@click.option("-b", "--broker-addr", default=None, help="One broker, host:port.")
@click.option("-c", "--cluster", default=None, help="Every broker of this cluster.")
@json_option
@click.pass_obj
def get_broker_config(
    namesrv: str, broker_addr: str | None, cluster: str | None, as_json: bool
) -> None:
    """A broker's settings (RocketMQ's names), or those of every broker of a cluster."""
    _targets(broker_addr, cluster)

    async def go(c: admin_lib.AdminClient) -> list[broker_config.BrokerSettings]:
        addrs = await broker_config.broker_addrs(c, broker_addr, cluster)
        return [await broker_config.get_broker_config(c, a) for a in addrs]

    found = run_admin(namesrv, go)
    rows = [(s.addr, k, v) for s in found for k, v in sorted(s.properties.items())]
    emit_table(["broker", "key", "value"], rows, as_json=as_json,
               footer="; ".join(f"{s.addr} version {s.version}" for s in found))  # fmt: skip


@click.command("update-broker-config")
@click.option("-b", "--broker-addr", default=None, help="One broker, host:port.")
@click.option("-c", "--cluster", default=None, help="Every broker of this cluster.")
@click.option("-k", "--key", required=True, help="Setting name, e.g. brokerPermission.")
@click.option("-v", "--value", required=True)
@json_option
@click.pass_obj
def update_broker_config(
    namesrv: str, broker_addr: str | None, cluster: str | None, key: str, value: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Change one setting on a broker (or every broker of a cluster); the broker keeps it in
    its config file. The answer says when a setting waits for a restart."""
    _targets(broker_addr, cluster)

    async def go(c: admin_lib.AdminClient) -> list[tuple[str, str]]:
        addrs = await broker_config.broker_addrs(c, broker_addr, cluster)
        return [(a, await broker_config.update_broker_config(c, a, {key: value}) or "applied")
                for a in addrs]  # fmt: skip

    emit_table(["broker", "result"], run_admin(namesrv, go), as_json=as_json)


@click.command("check-msg-send-rt")
@click.option("-t", "--topic", required=True)
@click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True)
@click.option("-s", "--size", type=click.IntRange(1), default=128, show_default=True,
              help="Body size in bytes.")  # fmt: skip
@json_option
@click.pass_obj
def check_msg_send_rt(namesrv: str, topic: str, amount: int, size: int, as_json: bool) -> None:
    """Send AMOUNT messages to the topic's write queues in turn and report the round trips
    per queue (the sends are real messages, stored like any other)."""

    async def go(c: admin_lib.AdminClient) -> list[send_rt.SendSample]:
        queues = await send_rt.topic_write_queues(c, topic)
        body = send_rt.message_body(size)
        targets = [queues[i % len(queues)] for i in range(amount)]
        return [await send_rt.send_one(c, q, topic, body) for q in progress(targets, "sending")]

    samples = run_admin(namesrv, go)
    by_queue: dict[tuple[str, int], list[send_rt.SendSample]] = {}
    for sample in samples:
        by_queue.setdefault((sample.queue.broker_name, sample.queue.queue_id), []).append(sample)
    rows = [(b, q, len(s), sum(x.ok for x in s),
             round(sum(x.rt_ms for x in s) / len(s), 3), round(max(x.rt_ms for x in s), 3),
             next((x.detail for x in s if not x.ok), ""))
            for (b, q), s in sorted(by_queue.items())]  # fmt: skip
    columns = ["broker", "queue", "sent", "ok", "avgRtMs", "maxRtMs", "error"]
    footer = (f"avg RT {send_rt.average_rt_ms(samples):.3f} ms over {len(samples)} sends "
              "(the first, a warm-up, left out)")  # fmt: skip
    emit_table(columns, rows, as_json=as_json, footer=footer)


@click.command("cluster-rt")
@click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True,
              help="Messages sent to each broker per round.")  # fmt: skip
@click.option("-s", "--size", type=click.IntRange(1), default=128, show_default=True,
              help="Body size in bytes.")  # fmt: skip
@click.option("-c", "--cluster", default=None, help="One cluster (default: every cluster).")
@click.option("-p", "--print-as-tlog", is_flag=True,
              help="Per broker: time|machine room|cluster|broker|RT (rounded ms).")  # fmt: skip
@click.option("-m", "--machine-room", default="noname", show_default=True,
              help="The machine room named in --print-as-tlog lines.")  # fmt: skip
@click.option("-i", "--interval", type=click.FloatRange(0), default=10, show_default=True,
              help="Seconds between rounds.")  # fmt: skip
@click.option("-r", "--rounds", type=click.IntRange(0), default=1, show_default=True,
              help="Rounds to run; 0 runs until interrupted, as mqadmin does.")  # fmt: skip
@json_option
@click.pass_obj
def cluster_rt(
    namesrv: str, amount: int, size: int, cluster: str | None, print_as_tlog: bool,
    machine_room: str, interval: float, rounds: int, as_json: bool,
) -> None:  # fmt: skip
    """Send AMOUNT messages to every broker's own topic (named after the broker) and report
    each broker's average round trip and its successful and failed sends."""
    body = send_rt.message_body(size)

    async def one_round(c: admin_lib.AdminClient) -> list[send_rt.BrokerRT]:
        pairs = await send_rt.cluster_brokers(c, cluster)
        return [await send_rt.broker_rt(c, cl, b, amount, body)
                for cl, b in progress(pairs, "sending")]  # fmt: skip

    done = 0
    while True:
        found = run_admin(namesrv, one_round)
        if print_as_tlog:
            now = time.strftime("%Y-%m-%d %H:%M:%S")
            for r in found:
                click.echo(f"{now}|{machine_room}|{r.cluster}|{r.broker_name}|{_half_up(r.rt_ms)}")
        else:
            rows = [(r.cluster, r.broker_name, round(r.rt_ms, 3), r.success, r.fail, r.detail)
                    for r in found]  # fmt: skip
            emit_table(["cluster", "broker", "rtMs", "successCount", "failCount", "error"], rows,
                       as_json=as_json)  # fmt: skip
        done += 1
        if done == rounds:
            return
        time.sleep(interval)
