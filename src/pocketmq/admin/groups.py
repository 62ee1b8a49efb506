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

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import MASTER_ID, retry_topic


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


async def consumer_progress(
    client: AdminClient, group: str, topic: str | None = None
) -> list[QueueProgress]:
    """GET_CONSUME_STATS on every master, sorted by topic, broker and queue."""
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    rows = []
    for addr in await client.master_addrs():
        body = await client.call_json(addr, RequestCode.GET_CONSUME_STATS, fields)
        try:
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
    if not rows:
        raise AdminError(
            f"no consume stats for group {group}{' and topic ' + topic if topic else ''}: "
            "no master broker reported a queue (check the group and topic names)"
        )
    return sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id))


def _master_addrs(route: dict[str, Any]) -> list[str]:
    addrs = [b["brokerAddrs"].get(str(MASTER_ID)) for b in route.get("brokerDatas", [])]
    return sorted(a for a in addrs if a)


async def reset_offset_by_time(
    client: AdminClient,
    group: str,
    topic: str,
    timestamp_ms: int,
    *,
    force: bool = True,
    progress: Callable[[list[str]], Iterable[str]] = lambda addrs: addrs,
) -> dict[tuple[str, int], int]:
    """Move a live group's offsets in a topic to a time on every master of the topic
    (progress wraps the list of brokers, for a progress bar). Returns (broker name, queue
    id) -> new offset."""
    header = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
    table = {}
    for addr in progress(_master_addrs(await client.route(topic))):
        body = await client.call_json(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        try:
            for key, offset in body["offsetTable"].items():
                _, broker, queue_id = json_body.parse_message_queue_key(key)
                table[(broker, queue_id)] = int(offset)
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad(addr, "reset offset body", exc) from exc
    return dict(sorted(table.items()))


async def consumer_status(
    client: AdminClient, group: str, client_id: str | None = None
) -> dict[str, Any]:
    """Each live consumer's running info (ConsumerRunningInfo JSON), keyed by client id."""
    # Every broker a consumer of the group heartbeats knows the group's retry topic.
    try:
        addrs = _master_addrs(await client.route(retry_topic(group)))
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
