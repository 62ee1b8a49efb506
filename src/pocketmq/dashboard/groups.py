"""The consumer-group pages' data: groups known to the master brokers, per-queue progress
and lag (GET_CONSUME_STATS), live connections (GET_CONSUMER_CONNECTION_LIST) and the offset
reset by time (INVOKE_BROKER_TO_RESET_OFFSET, committing the offsets itself when no consumer
is online, as mqadmin's resetOffsetByTime does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.admin import AdminClient, AdminError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import MASTER_ID, is_system_group


@dataclass(frozen=True, slots=True)
class QueueProgress:
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int  # ms; 0 when nothing was consumed

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class GroupStats:
    queues: list[QueueProgress]
    consume_tps: float

    @property
    def lag(self) -> int:
        return sum(q.lag for q in self.queues)


def _bad(addr: str, what: str, exc: Exception) -> AdminError:
    return AdminError(f"{addr} sent a bad {what}: {exc!r}")


async def group_names(admin: AdminClient, *, system: bool = False) -> list[str]:
    """Every subscription group of every master broker."""
    names: set[str] = set()
    for addr in (await admin.cluster_info()).masters().values():
        body = await admin.call_json(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        try:
            names.update(str(g) for g in body["subscriptionGroupTable"])
        except (KeyError, TypeError) as exc:
            raise _bad(addr, "subscription group table", exc) from exc
    return sorted(n for n in names if system or not is_system_group(n))


async def group_stats(admin: AdminClient, group: str, topic: str | None = None) -> GroupStats:
    """The group's progress on every master that knows it (others are skipped)."""
    queues: list[QueueProgress] = []
    tps = 0.0
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    for addr in (await admin.cluster_info()).masters().values():
        resp = await admin.call(
            addr, RequestCode.GET_CONSUME_STATS, fields,
            ok=(ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                ResponseCode.SYSTEM_ERROR),
        )  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            continue  # this broker has no offsets of the group
        try:
            body: Any = json_body.loads(resp.body)
            tps += float(body.get("consumeTps", 0.0))
            for key, w in body["offsetTable"].items():
                mq_topic, broker_name, queue_id = json_body.parse_message_queue_key(key)
                queues.append(
                    QueueProgress(mq_topic, broker_name, queue_id, int(w["brokerOffset"]),
                                  int(w["consumerOffset"]), int(w.get("lastTimestamp", 0)))
                )  # fmt: skip
        except (AdminError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad(addr, "consume stats body", exc) from exc
    queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return GroupStats(queues, tps)


@dataclass(frozen=True, slots=True)
class Connection:
    client_id: str
    client_addr: str
    language: str
    version: int


async def connections(admin: AdminClient, group: str) -> tuple[list[Connection], str]:
    """The group's live consumers on the masters, and a note when a broker could not say."""
    found: dict[str, Connection] = {}
    notes = []
    for addr in (await admin.cluster_info()).masters().values():
        resp = await admin.call(
            addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
            ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
        )  # fmt: skip
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            notes.append(f"{addr} does not serve GET_CONSUMER_CONNECTION_LIST")
            continue
        if resp.code != ResponseCode.SUCCESS:
            continue
        try:
            for c in json_body.loads(resp.body)["connectionSet"]:
                conn = Connection(str(c["clientId"]), str(c["clientAddr"]),
                                  str(c.get("language", "")), int(c.get("version", 0)))  # fmt: skip
                found[conn.client_id] = conn
        except (AdminError, KeyError, TypeError, ValueError) as exc:
            raise _bad(addr, "consumer connection body", exc) from exc
    return sorted(found.values(), key=lambda c: c.client_id), "; ".join(notes)


async def reset_offsets(
    admin: AdminClient, group: str, topic: str, timestamp_ms: int
) -> dict[tuple[str, int], int]:
    """Moves the group to the first message stored at or after ``timestamp_ms`` on every
    queue of the topic (forced: also backwards); (broker name, queue id) -> new offset."""
    route = await admin.route(topic)
    done: dict[tuple[str, int], int] = {}
    for broker in route.get("brokerDatas", []):
        name = str(broker["brokerName"])
        addr = broker["brokerAddrs"].get(str(MASTER_ID)) or broker["brokerAddrs"].get(MASTER_ID)
        if not addr:
            continue
        fields = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": True}
        resp = await admin.call(
            addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields,
            ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
        )  # fmt: skip
        if resp.code == ResponseCode.SUCCESS:
            try:
                table = json_body.loads(resp.body)["offsetTable"]
                for key, offset in table.items():
                    _, _, queue_id = json_body.parse_message_queue_key(key)
                    done[(name, queue_id)] = int(offset)
            except (AdminError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise _bad(addr, "reset offset body", exc) from exc
            continue
        # Nobody online to tell: commit each queue's offset at that time ourselves.
        for q in route.get("queueDatas", []):
            if q["brokerName"] != name:
                continue
            for queue_id in range(int(q["readQueueNums"])):
                found = await admin.call(
                    addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                    {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms},
                )  # fmt: skip
                offset = int(found.ext_fields.get("offset", 0))
                await admin.call(
                    addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                    {"consumerGroup": group, "topic": topic, "queueId": queue_id,
                     "commitOffset": offset},
                )  # fmt: skip
                done[(name, queue_id)] = offset
    if not done:
        raise AdminError(f"no master broker serves topic {topic}")
    return done
