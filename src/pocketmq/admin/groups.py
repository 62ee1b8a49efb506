"""Consumer groups: their settings on the masters (updateSubGroup), their progress per queue
(consumerProgress, from GET_CONSUME_STATS), and what reaches a live group through its brokers:
resetting its offsets to a time (INVOKE_BROKER_TO_RESET_OFFSET) and its consumers' running
info (GET_CONSUMER_RUNNING_INFO). Neither moves an offline group: the broker refuses the reset
with CONSUMER_NOT_ONLINE, which comes back as the error.

A group's settings travel as RocketMQ's SubscriptionGroupConfig JSON; an update sends the
group's current settings on each broker with the changes applied (members a broker does not
have take its defaults), so what is left out keeps its value.

No formatting here; functions take an AdminClient and return parsed values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.admin.topics import delete_topic
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import dlq_topic, retry_topic


def _bad(addr: str, what: str, exc: Exception) -> AdminError:
    return AdminError(f"{addr} sent a bad {what}: {exc!r}")


async def subscription_group(client: AdminClient, addr: str, group: str) -> dict[str, Any] | None:
    """A consumer group's SubscriptionGroupConfig JSON on one broker (None where it has none)."""
    body = await client.call_json(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    try:
        cfg = body["subscriptionGroupTable"].get(group)
    except (KeyError, TypeError, AttributeError) as exc:
        raise _bad(addr, "subscription group table", exc) from exc
    if cfg is not None and not isinstance(cfg, dict):
        raise AdminError(f"{addr} sent a bad subscription group config for {group}")
    return None if cfg is None else {**cfg, "groupName": group}


async def subscription_groups(
    client: AdminClient, group: str, cluster: str | None = None
) -> dict[str, dict[str, Any]]:
    """The group's settings on each master (of a cluster) that has it: address -> config."""
    found = {}
    for addr in await client.master_addrs(cluster):
        cfg = await subscription_group(client, addr, group)
        if cfg is not None:
            found[addr] = cfg
    if not found:
        raise AdminError(
            f"no master broker has subscription group {group} (create it with "
            "update-subscription-group)"
        )
    return found


async def update_subscription_group(
    client: AdminClient, group: str, changes: dict[str, Any], cluster: str | None = None
) -> dict[str, dict[str, Any]]:
    """Create or update a group on every master (of a cluster); changes are keyed by
    SubscriptionGroupConfig's JSON names. Returns address -> the config the broker holds now."""
    if not group.strip():
        raise AdminError("the group name is blank")
    done = {}
    for addr in await client.master_addrs(cluster):
        current = await subscription_group(client, addr, group) or {}
        cfg = {**current, **changes, "groupName": group}
        await client.call(
            addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json_body.dumps(cfg)
        )
        done[addr] = await subscription_group(client, addr, group) or cfg
    return done


async def delete_subscription_group(
    client: AdminClient, group: str, *, broker: str | None = None, cluster: str | None = None
) -> tuple[list[str], list[str]]:
    """DELETE_SUBSCRIPTIONGROUP on one broker, or on every master (of a cluster); with a
    cluster, the group's retry and dead-letter topics go too, as mqadmin deleteSubGroup does.
    Returns (the brokers it was deleted on, what could not be deleted, with why)."""
    addrs = [broker] if broker else await client.master_addrs(cluster)
    for addr in addrs:
        await client.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group})
    problems = []
    if cluster and not broker:
        for topic in (retry_topic(group), dlq_topic(group)):
            try:
                await delete_topic(client, topic, cluster)
            except AdminError as exc:
                problems.append(f"{topic}: {exc}")
    return addrs, problems


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a group's GET_CONSUME_STATS (ConsumeStats.offsetTable's OffsetWrapper)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp_ms: int  # 0: nothing consumed yet

    @property
    def lag(self) -> int:
        return self.broker_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """A group's ConsumeStats over the masters: its queues and its consume TPS."""

    queues: list[QueueProgress]
    consume_tps: float

    @property
    def lag(self) -> int:
        return sum(max(0, q.lag) for q in self.queues)


async def group_names(client: AdminClient) -> list[str]:
    """Every subscription group any master broker has."""
    names: set[str] = set()
    for addr in await client.master_addrs():
        body = await client.call_json(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        try:
            names.update(str(g) for g in body["subscriptionGroupTable"])
        except (KeyError, TypeError) as exc:
            raise _bad(addr, "subscription group table", exc) from exc
    return sorted(names)


async def group_progress(
    client: AdminClient, group: str, topic: str | None = None
) -> GroupProgress:
    """GET_CONSUME_STATS on every master (queues sorted by topic, broker and queue); a master
    without the group adds nothing."""
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    rows = []
    tps = 0.0
    for addr in await client.master_addrs():
        body = await client.call_json(addr, RequestCode.GET_CONSUME_STATS, fields)
        try:
            tps += float(body.get("consumeTps", 0.0))
            for key, w in body["offsetTable"].items():
                rows.append(
                    QueueProgress(
                        *json_body.parse_message_queue_key(key),
                        int(w["brokerOffset"]),
                        int(w["consumerOffset"]),
                        int(w.get("lastTimestamp", 0)),
                    )
                )
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad(addr, "consume stats body", exc) from exc
    rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id))
    return GroupProgress(rows, tps)


async def consumer_progress(
    client: AdminClient, group: str, topic: str | None = None
) -> list[QueueProgress]:
    """The group's queues (group_progress); AdminError when no master reports one."""
    rows = (await group_progress(client, group, topic)).queues
    if not rows:
        raise AdminError(
            f"no consume stats for group {group}{' and topic ' + topic if topic else ''}: "
            "no master broker reported a queue (check the group and topic names)"
        )
    return rows


async def reset_offset_by_time(
    client: AdminClient,
    group: str,
    topic: str,
    timestamp_ms: int,
    *,
    force: bool = True,
    progress: Callable[[list[str]], Iterable[str]] = lambda addrs: addrs,
) -> dict[tuple[str, int], int]:
    """Move the group's offsets in a topic to a time on every master of the topic (progress
    wraps the list of brokers, for a progress bar). Returns (broker name, queue id) -> new
    offset. A broker with no consumer of the group online (CONSUMER_NOT_ONLINE) changes
    nothing itself; then the offsets are committed here, as mqadmin's resetOffsetByTime
    falls back to its old command: per queue the offset at that time, and without ``force``
    only where that moves the group back."""
    header = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
    table = {}
    masters = route_masters(await client.route(topic))
    names = {addr: name for name, addr in masters.items()}
    for addr in progress(list(masters.values())):
        resp = await client.call(
            addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header,
            ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
        )  # fmt: skip
        if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
            table.update(await _commit_offsets_at(client, addr, names[addr], group, topic,
                                                  timestamp_ms, force))  # fmt: skip
            continue
        try:
            for key, offset in json_body.loads(resp.body)["offsetTable"].items():
                _, broker, queue_id = json_body.parse_message_queue_key(key)
                table[(broker, queue_id)] = int(offset)
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad(addr, "reset offset body", exc) from exc
    return dict(sorted(table.items()))


async def _commit_offsets_at(
    client: AdminClient, addr: str, broker_name: str, group: str, topic: str,
    timestamp_ms: int, force: bool,
) -> dict[tuple[str, int], int]:  # fmt: skip
    """One broker's part of the reset without a consumer online."""
    done = {}
    current = {
        q.queue_id: q.consumer_offset
        for q in (await group_progress(client, group, topic)).queues
        if q.broker_name == broker_name
    }
    for queue_id in sorted(current):
        found = await client.call(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms},
        )  # fmt: skip
        offset = int(found.ext_fields.get("offset", 0))
        if not force and offset >= current[queue_id]:
            continue
        await client.call(
            addr, RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset},
        )  # fmt: skip
        done[(broker_name, queue_id)] = offset
    return done


async def consumer_status(
    client: AdminClient, group: str, client_id: str | None = None
) -> dict[str, Any]:
    """Each live consumer's running info (ConsumerRunningInfo JSON), keyed by client id."""
    # Every broker a consumer of the group heartbeats knows the group's retry topic.
    try:
        addrs = list(route_masters(await client.route(retry_topic(group))).values())
    except AdminError as exc:
        raise AdminError(f"no broker knows the group {group} (is a consumer online?)") from exc
    if not addrs:
        raise AdminError(f"no broker knows the group {group} (is a consumer online?)")
    if client_id:
        ids = [client_id]
    else:
        body = await client.call_json(
            addrs[0], RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
        )
        try:
            ids = [str(i) for i in body["consumerIdList"]]
        except (KeyError, TypeError) as exc:
            raise _bad(addrs[0], "consumer list", exc) from exc
    out = {}
    for cid in ids:
        header = {"consumerGroup": group, "clientId": cid, "jstackEnable": False}
        out[cid] = await client.call_json(addrs[0], RequestCode.GET_CONSUMER_RUNNING_INFO, header)
    return out
