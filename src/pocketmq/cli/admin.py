"""``pocketmq admin``: the first mqadmin verbs, over the remoting protocol.

Each verb asks the NameServer for routes and talks to brokers directly, as mqadmin does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from pocketmq import admin as admin_lib
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.cli.output import emit_table, json_option
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageExt, PullSysFlag
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY, PERM_READ_WRITE
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

T = TypeVar("T")


class AdminError(click.ClickException):
    pass


# Where the group's --access-key / --secret-key leave the credentials for every verb.
_CREDENTIALS = "pocketmq.admin.credentials"


def _credentials() -> SessionCredentials | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_CREDENTIALS)


def _run(fn: Callable[[RemotingClient], Awaitable[T]]) -> T:
    async def main() -> T:
        client = RemotingClient(credentials=_credentials())
        try:
            return await fn(client)
        except (ConnectionError, TimeoutError) as exc:
            raise AdminError(str(exc)) from exc
        finally:
            await client.close()

    return asyncio.run(main())


def run_admin(namesrv: str, fn: Callable[[admin_lib.AdminClient], Awaitable[T]]) -> T:
    """Runs fn with an AdminClient on namesrv; the library's errors become CLI errors."""

    async def main() -> T:
        remoting = RemotingClient(credentials=_credentials())
        async with admin_lib.AdminClient(namesrv, remoting=remoting) as client:
            return await fn(client)

    try:
        return asyncio.run(main())
    except admin_lib.AdminError as exc:
        raise AdminError(str(exc)) from exc


async def _call(
    client: RemotingClient,
    addr: str,
    code: int,
    fields: dict[str, Any] | None = None,
    body: bytes = b"",
    ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
) -> RemotingCommand:
    resp = await client.invoke(addr, RemotingCommand.request(code, fields, body), 10)
    if resp.code not in ok:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}".strip())
    return resp


async def _route(client: RemotingClient, namesrv: str, topic: str) -> dict[str, Any]:
    resp = await _call(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    route: dict[str, Any] = json_body.loads(resp.body)
    return route


async def _masters(client: RemotingClient, namesrv: str, cluster: str | None) -> list[str]:
    resp = await _call(client, namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
    info = json_body.loads(resp.body)
    names = (
        info["clusterAddrTable"].get(cluster, [])
        if cluster
        else [n for ns in info["clusterAddrTable"].values() for n in ns]
    )
    masters = [info["brokerAddrTable"][n]["brokerAddrs"].get("0") for n in names]
    found = [m for m in masters if m]
    if not found:
        raise AdminError(f"no master broker found{' in cluster ' + cluster if cluster else ''}")
    return found


async def _subscription_group(
    client: RemotingClient, addr: str, group: str
) -> SubscriptionGroupConfig | None:
    """A consumer group's settings on one broker (None where it has none)."""
    resp = await _call(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    try:
        cfg = json_body.loads(resp.body)["subscriptionGroupTable"].get(group)
        if cfg is None:
            return None
        return SubscriptionGroupConfig.from_json({**cfg, "groupName": group})
    except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdminError(f"{addr} sent a bad subscription group table: {exc!r}") from exc


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True))


@click.group()
@click.option(
    "-n", "--namesrv-addr", default="127.0.0.1:9876", show_default=True, help="NameServer address."
)
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
@json_option
@click.pass_obj
def topic_list(namesrv: str, as_json: bool) -> None:
    """List every topic the NameServer knows."""

    async def go(c: admin_lib.AdminClient) -> list[str]:
        body = await c.namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        try:
            return sorted(str(t) for t in body["topicList"])
        except (KeyError, TypeError) as exc:
            raise admin_lib.AdminError(f"the NameServer sent a bad topic list: {exc!r}") from exc

    emit_table(["topic"], [(t,) for t in run_admin(namesrv, go)], as_json=as_json)


@admin.command("topic-route")
@click.option("-t", "--topic", required=True)
@click.pass_obj
def topic_route(namesrv: str, topic: str) -> None:
    """Print a topic's route (queues and brokers)."""
    _echo_json(_run(lambda c: _route(c, namesrv, topic)))


@admin.command("cluster-list")
@click.pass_obj
def cluster_list(namesrv: str) -> None:
    """List clusters, brokers and their addresses."""

    async def go(c: RemotingClient) -> Any:
        return json_body.loads((await _call(c, namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)).body)

    info = _run(go)
    click.echo(f"{'cluster':<20} {'broker':<20} {'id':>3}  address")
    for cluster, names in sorted(info["clusterAddrTable"].items()):
        for name in names:
            for bid, addr in sorted(info["brokerAddrTable"][name]["brokerAddrs"].items()):
                click.echo(f"{cluster:<20} {name:<20} {bid:>3}  {addr}")


@admin.command("update-topic")
@click.option("-t", "--topic", required=True)
@click.option("-r", "--read-queues", default=4, show_default=True, type=click.IntRange(1, 1024))
@click.option("-w", "--write-queues", default=4, show_default=True, type=click.IntRange(1, 1024))
@click.option(
    "-p",
    "--perm",
    default=PERM_READ_WRITE,
    show_default=True,
    type=click.IntRange(0, 7),
    help="2 write, 4 read, 6 both.",
)
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@click.option("-o", "--order", is_flag=True, help="An ordered topic.")
@click.option(
    "-a",
    "--attributes",
    default="",
    help="Attribute changes, as mqadmin's: +message.type=TRANSACTION,-key.",
)
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
) -> None:
    """Create or update a topic on every master broker (of a cluster)."""

    async def go(c: RemotingClient) -> list[str]:
        masters = await _masters(c, namesrv, cluster)
        for addr in masters:
            await _call(
                c,
                addr,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": AUTO_CREATE_TOPIC_KEY,
                    "readQueueNums": read_queues,
                    "writeQueueNums": write_queues,
                    "perm": perm,
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": 0,
                    "order": order,
                    **({"attributes": attributes} if attributes else {}),
                },
            )
        return masters

    for addr in _run(go):
        click.echo(f"create topic {topic} on {addr}: OK")


@admin.command("delete-topic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", default=None)
@click.pass_obj
def delete_topic(namesrv: str, topic: str, cluster: str | None) -> None:
    """Delete a topic from the masters and the NameServer."""

    async def go(c: RemotingClient) -> None:
        for addr in await _masters(c, namesrv, cluster):
            await _call(c, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        await _call(c, namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    _run(go)
    click.echo(f"delete topic {topic}: OK")


@admin.command("send-message")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="Message body (UTF-8).")
@click.option("--tags", default=None)
@click.option("-k", "--keys", default=None)
@click.pass_obj
def send_message(namesrv: str, topic: str, body: str, tags: str | None, keys: str | None) -> None:
    """Send one test message (the topic is auto-created where the broker allows it)."""

    async def go(c: RemotingClient) -> tuple[str, RemotingCommand]:
        resp = await c.invoke(
            namesrv,
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
            10,
        )
        if resp.code != ResponseCode.SUCCESS:
            route = await _route(c, namesrv, AUTO_CREATE_TOPIC_KEY)
        else:
            route = json_body.loads(resp.body)
        addr = route["brokerDatas"][0]["brokerAddrs"]["0"]
        props = {k: v for k, v in (("TAGS", tags), ("KEYS", keys)) if v}
        props["UNIQ_KEY"] = f"{int(time.time() * 1000):032X}"
        sent = await _call(
            c,
            addr,
            RequestCode.SEND_MESSAGE,
            {
                "producerGroup": "PMQ_ADMIN",
                "topic": topic,
                "defaultTopic": AUTO_CREATE_TOPIC_KEY,
                "defaultTopicQueueNums": 4,
                "queueId": -1,
                "sysFlag": 0,
                "bornTimestamp": int(time.time() * 1000),
                "flag": 0,
                "properties": encode_properties(props),
                "reconsumeTimes": 0,
            },
            body.encode(),
        )
        return addr, sent

    addr, sent = _run(go)
    f = sent.ext_fields
    click.echo(
        f"sent to {addr} queue {f.get('queueId')} offset {f.get('queueOffset')}, "
        f"msgId {f.get('msgId')}"
    )


@admin.command("consume-message")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--count", default=10, show_default=True, type=click.IntRange(1))
@click.option("--tags", default="*", show_default=True, help='Tag expression, e.g. "A || B".')
@click.pass_obj
def consume_message(namesrv: str, topic: str, count: int, tags: str) -> None:
    """Print up to COUNT messages from the start of each queue (commits no offset)."""

    async def go(c: RemotingClient) -> list[Any]:
        route = await _route(c, namesrv, topic)
        addrs = {b["brokerName"]: b["brokerAddrs"].get("0") for b in route["brokerDatas"]}
        out: list[MessageExt] = []
        for q in route["queueDatas"]:
            addr = addrs.get(q["brokerName"])
            for qid in range(q["readQueueNums"]):
                if addr is None or len(out) >= count:
                    continue
                resp = await _call(
                    c,
                    addr,
                    RequestCode.PULL_MESSAGE,
                    {
                        "consumerGroup": "PMQ_ADMIN",
                        "topic": topic,
                        "queueId": qid,
                        "queueOffset": 0,
                        "maxMsgNums": count - len(out),
                        "sysFlag": PullSysFlag.SUBSCRIPTION,
                        "commitOffset": 0,
                        "suspendTimeoutMillis": 0,
                        "subscription": tags,
                        "subVersion": 0,
                    },
                    ok=(0, 19, 20, 21),
                )
                pos = 0
                while pos < len(resp.body) and len(out) < count:
                    size = struct.unpack_from(">i", resp.body, pos)[0]
                    out.append(decode_message(resp.body[pos : pos + size]))
                    pos += size
        return out

    for m in _run(go):
        body = m.body.decode("utf-8", "replace")
        click.echo(
            f"queue {m.queue_id} offset {m.queue_offset} tags {m.tags or '-'} "
            f"keys {m.keys or '-'}: {body}"
        )
    sys.stdout.flush()


@admin.command("consumer-progress")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", default=None, help="Only this topic (default: all of the group's).")
@click.pass_obj
def consumer_progress(namesrv: str, group: str, topic: str | None) -> None:
    """Per queue: the broker's max offset, the group's committed offset, the lag and when the
    last consumed message was stored (GET_CONSUME_STATS on every master broker)."""

    # (topic, broker name, queue id, broker offset, consumer offset, last timestamp ms)
    Row = tuple[str, str, int, int, int, int]

    async def go(c: RemotingClient) -> list[Row]:
        fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
        rows: list[Row] = []
        for addr in await _masters(c, namesrv, None):
            resp = await _call(c, addr, RequestCode.GET_CONSUME_STATS, fields)
            try:
                for key, w in json_body.loads(resp.body)["offsetTable"].items():
                    rows.append(
                        (
                            *json_body.parse_message_queue_key(key),
                            int(w["brokerOffset"]),
                            int(w["consumerOffset"]),
                            int(w.get("lastTimestamp", 0)),
                        )
                    )
            except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise AdminError(f"{addr} sent a bad consume stats body: {exc!r}") from exc
        return sorted(rows)

    rows = _run(go)
    if not rows:
        raise AdminError(
            f"no consume stats for group {group}{' and topic ' + topic if topic else ''}: "
            "no master broker reported a queue"
        )
    click.echo(
        f"{'topic':<32} {'broker':<20} {'queue':>5} {'broker offset':>14} "
        f"{'consumer offset':>16} {'lag':>8}  last time"
    )
    total = 0
    for mq_topic, name, qid, broker_offset, consumer_offset, last_ms in rows:
        lag = broker_offset - consumer_offset
        total += lag
        # Local time, as mqadmin prints it.
        last = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last_ms / 1000)) if last_ms else "N/A"
        )
        click.echo(
            f"{mq_topic:<32} {name:<20} {qid:>5} {broker_offset:>14} {consumer_offset:>16} "
            f"{lag:>8}  {last}"
        )
    click.echo(f"total lag: {total}")


@admin.command("update-subscription-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@click.option(
    "-r",
    "--retry-max-times",
    type=click.IntRange(0),
    default=None,
    help="Redeliveries of a failed message before it goes to the group's dead-letter queue.",
)
@click.option(
    "-q",
    "--retry-queue-nums",
    type=click.IntRange(0, 1024),
    default=None,
    help="Queues of the group's retry topic; 0 turns retries off.",
)
@click.option(
    "-o",
    "--orderly/--no-orderly",
    default=None,
    help="Orderly consumption: 5.x clients get one message of a message group at a time.",
)
@click.option(
    "-s",
    "--consume-enable/--no-consume-enable",
    default=None,
    help="consumeEnable: kept for RocketMQ tools; pocketmq does not refuse a disabled group yet.",
)
@click.option(
    "-d",
    "--broadcast/--no-broadcast",
    default=None,
    help="consumeBroadcastEnable: kept for RocketMQ tools; pocketmq does not enforce it yet.",
)
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
) -> None:
    """Create or update a consumer group on every master broker (of a cluster).

    Options left out keep the group's current value on each broker, RocketMQ's default for a
    new group; mqadmin updateSubGroup would reset them to its own defaults instead.
    """
    if not group.strip():
        raise click.BadParameter("the group name is blank", param_hint="'-g' / '--group'")
    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("retry_max_times", retry_max_times),
            ("retry_queue_nums", retry_queue_nums),
            ("consume_message_orderly", orderly),
            ("consume_enable", consume_enable),
            ("consume_broadcast_enable", broadcast),
        )
        if value is not None
    }

    async def go(c: RemotingClient) -> list[tuple[str, SubscriptionGroupConfig]]:
        done = []
        for addr in await _masters(c, namesrv, cluster):
            current = await _subscription_group(c, addr, group) or SubscriptionGroupConfig(group)
            cfg = dataclasses.replace(current, **changes)
            await _call(
                c, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                body=json_body.dumps(cfg.to_json()),
            )  # fmt: skip
            done.append((addr, cfg))
        return done

    for addr, cfg in _run(go):
        click.echo(f"update subscription group {group} on {addr}: OK")
        _echo_json(cfg.to_json())


@admin.command("subscription-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-c", "--cluster", default=None, help="Only the masters of this cluster.")
@click.pass_obj
def subscription_group(namesrv: str, group: str, cluster: str | None) -> None:
    """Print a consumer group's settings on each master broker that has it."""

    async def go(c: RemotingClient) -> dict[str, SubscriptionGroupConfig]:
        found = {}
        for addr in await _masters(c, namesrv, cluster):
            cfg = await _subscription_group(c, addr, group)
            if cfg is not None:
                found[addr] = cfg
        return found

    found = _run(go)
    if not found:
        raise AdminError(f"no master broker has subscription group {group}")
    _echo_json({addr: cfg.to_json() for addr, cfg in found.items()})
