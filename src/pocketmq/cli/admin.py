"""``pocketmq admin``: mqadmin's verbs under our names, on the admin library (pocketmq.admin),
against any NameServer (pocketmq's or Apache RocketMQ's) and its brokers.

Every verb prints a table (or, where it has no rows, its document) and takes ``--json``; a
failure is one line on stderr saying who refused what (with RocketMQ's code name) or what to
check, and exit status 1. This module holds the group, the shared runner and the topic and
cluster verbs; the other families live in the admin_* modules next to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from pocketmq import admin as admin_lib
from pocketmq.admin import topics
from pocketmq.cli.lazy import LazyGroup
from pocketmq.cli.output import emit_json, emit_table, json_option
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.names import PERM_READ_WRITE, perm_to_string

T = TypeVar("T")


class AdminError(click.ClickException):
    pass


# Where the group's --access-key / --secret-key leave the credentials for every verb.
_CREDENTIALS = "pocketmq.admin.credentials"


def _credentials() -> SessionCredentials | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_CREDENTIALS)


def run_admin(namesrv: str, fn: Callable[[admin_lib.AdminClient], Awaitable[T]]) -> T:
    """Runs fn with an AdminClient on namesrv; the library's errors become CLI errors."""

    async def main() -> T:
        async with admin_lib.AdminClient(namesrv, credentials=_credentials()) as client:
            return await fn(client)

    try:
        return asyncio.run(main())
    except admin_lib.AdminError as exc:
        raise AdminError(str(exc)) from exc


# The verbs of the admin_* modules, imported when invoked (each module's command for a verb is
# named as the verb, with underscores).
_VERBS_ELSEWHERE = {
    "pocketmq.cli.admin_brokers": (
        "broker-status", "wipe-write-perm", "add-write-perm", "get-namesrv-config",
        "update-namesrv-config",
    ),
    "pocketmq.cli.admin_consumers": (
        "consumer-progress", "subscription-group", "update-subscription-group",
        "delete-subscription-group", "reset-offset-by-time", "consumer-status",
    ),
    "pocketmq.cli.admin_messages": ("send-message", "consume-message", "print-msg"),
    "pocketmq.cli.admin_groups_topics": (
        "topic-status", "consumer-connection", "producer-connection", "topic-consumed-by",
        "clone-group-offset", "get-broker-config", "update-broker-config", "check-msg-send-rt",
        "cluster-rt",
    ),
    "pocketmq.cli.admin_query_msg": (
        "query-msg-by-id", "query-msg-by-unique-key", "query-msg-by-key", "query-msg-by-offset",
    ),
    "pocketmq.cli.admin_stats": ("stats-all", "broker-consume-stats"),
}  # fmt: skip


@click.group(
    cls=LazyGroup,
    lazy={
        verb: f"{module}:{verb.replace('-', '_')}"
        for module, verbs in _VERBS_ELSEWHERE.items()
        for verb in verbs
    },
)
@click.option(
    "-n", "--namesrv-addr", default="127.0.0.1:9876", show_default=True,
    help="NameServer address(es), ';'-separated.",
)  # fmt: skip
@click.option("--access-key", help="ACL access key: sign every request (brokers with aclEnable).")
@click.option("--secret-key", help="The access key's secret key.")
@click.pass_context
def admin(
    ctx: click.Context, namesrv_addr: str, access_key: str | None, secret_key: str | None
) -> None:
    """Administer topics and look at a cluster (in the spirit of mqadmin)."""
    ctx.obj = namesrv_addr
    if (access_key is None) != (secret_key is None):
        raise click.UsageError("--access-key and --secret-key go together")
    if access_key is not None and secret_key is not None:
        ctx.meta[_CREDENTIALS] = SessionCredentials(access_key, secret_key)


@admin.command("topic-list")
@click.option("-c", "--cluster", default=None, help="Only the topics of this cluster.")
@json_option
@click.pass_obj
def topic_list(namesrv: str, cluster: str | None, as_json: bool) -> None:
    """List every topic the NameServer knows (of a cluster)."""
    found = run_admin(
        namesrv,
        lambda c: topics.topics_of_cluster(c, cluster) if cluster else topics.topic_list(c),
    )
    emit_table(["topic"], [(t,) for t in found], as_json=as_json)


@admin.command("system-topic-list")
@json_option
@click.pass_obj
def system_topic_list(namesrv: str, as_json: bool) -> None:
    """The NameServer's system topics: each cluster and broker name
    (GET_SYSTEM_TOPIC_LIST_FROM_NS)."""
    found = run_admin(namesrv, topics.system_topics)
    footer = f"ask {found.broker_addr} for the rest" if found.broker_addr else None
    emit_table(["topic"], [(t,) for t in found.topics], as_json=as_json, footer=footer)


@admin.command("unit-topic-list")
@click.option(
    "-k", "--kind", type=click.Choice(sorted(topics.UNIT_LISTS)), default="unit",
    show_default=True,
    help="unit: unit topics; unit-sub: with unit subscriptions; unit-sub-not-unit: both, "
    "minus the unit topics.",
)  # fmt: skip
@json_option
@click.pass_obj
def unit_topic_list(namesrv: str, kind: str, as_json: bool) -> None:
    """The NameServer's unit topic lists (GET_UNIT_TOPIC_LIST and the two others)."""
    found = run_admin(namesrv, lambda c: topics.unit_topics(c, kind))
    emit_table(["topic"], [(t,) for t in found], as_json=as_json)


@admin.command("topic-route")
@click.option("-t", "--topic", required=True)
@json_option
@click.pass_obj
def topic_route(namesrv: str, topic: str, as_json: bool) -> None:
    """Print a topic's route: its queues on each broker (--json: RocketMQ's TopicRouteData)."""
    route = run_admin(namesrv, lambda c: c.route(topic))
    if as_json:
        emit_json(route)
        return
    rows = [
        (name, bid, addr, read, write, perm_to_string(perm))
        for name, bid, addr, read, write, perm in topics.route_rows(route)
    ]
    columns = ["broker", "id", "address", "read queues", "write queues", "perm"]
    emit_table(columns, rows, as_json=False, title=f"route of {topic}")


@admin.command("topic-cluster-list")
@click.option("-t", "--topic", required=True)
@json_option
@click.pass_obj
def topic_cluster_list(namesrv: str, topic: str, as_json: bool) -> None:
    """The clusters whose brokers serve a topic."""
    found = run_admin(namesrv, lambda c: topics.topic_clusters(c, topic))
    emit_table(["cluster"], [(c,) for c in found], as_json=as_json)


@admin.command("cluster-list")
@json_option
@click.pass_obj
def cluster_list(namesrv: str, as_json: bool) -> None:
    """List clusters, brokers and their addresses."""
    info = run_admin(namesrv, lambda c: c.cluster_info())
    rows = [
        (cluster, name, bid, addr)
        for cluster, names in sorted(info.clusters.items())
        for name in names
        for bid, addr in sorted(info.brokers.get(name, {}).items())
    ]
    emit_table(["cluster", "broker", "id", "address"], rows, as_json=as_json)


@admin.command("update-topic")
@click.option("-t", "--topic", required=True)
@click.option("-r", "--read-queues", default=4, show_default=True, type=click.IntRange(1, 1024))
@click.option("-w", "--write-queues", default=4, show_default=True, type=click.IntRange(1, 1024))
@click.option(
    "-p", "--perm", default=PERM_READ_WRITE, show_default=True, type=click.IntRange(0, 7),
    help="2 write, 4 read, 6 both.",
)  # fmt: skip
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@click.option("-o", "--order", is_flag=True, help="An ordered topic.")
@click.option(
    "-a", "--attributes", default="",
    help="Attribute changes, as mqadmin's: +message.type=TRANSACTION,-key.",
)  # fmt: skip
@json_option
@click.pass_obj
def update_topic(
    namesrv: str,
    topic: str,
    read_queues: int,
    write_queues: int,
    perm: int,
    cluster: str | None,
    order: bool,
    attributes: str,
    as_json: bool,
) -> None:
    """Create or update a topic on every master broker (of a cluster)."""
    settings = topics.TopicSettings(
        topic=topic, read_queue_nums=read_queues, write_queue_nums=write_queues, perm=perm,
        order=order, attributes=attributes,
    )  # fmt: skip
    done = run_admin(namesrv, lambda c: topics.update_topic(c, settings, cluster))
    rows = [(addr, topic, read_queues, write_queues, perm_to_string(perm), "OK") for addr in done]
    columns = ["broker", "topic", "read queues", "write queues", "perm", "result"]
    emit_table(columns, rows, as_json=as_json)


@admin.command("delete-topic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", default=None, help="Only on the masters of this cluster.")
@json_option
@click.pass_obj
def delete_topic(namesrv: str, topic: str, cluster: str | None, as_json: bool) -> None:
    """Delete a topic from the masters and the NameServers."""
    done = run_admin(namesrv, lambda c: topics.delete_topic(c, topic, cluster))
    emit_table(["address", "topic", "result"], [(a, topic, "OK") for a in done], as_json=as_json)
