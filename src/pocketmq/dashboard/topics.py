"""The topics pages' data: every topic the NameServer knows, and one topic's route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.admin import AdminClient, AdminError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import is_system_topic


@dataclass(frozen=True, slots=True)
class QueueRow:
    broker_name: str
    read_queues: int
    write_queues: int
    perm: int
    addrs: dict[int, str]


async def topic_names(admin: AdminClient, *, system: bool) -> list[str]:
    body = await admin.namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    try:
        names = sorted(str(t) for t in body["topicList"])
    except (KeyError, TypeError) as exc:
        raise AdminError(f"the NameServer sent a bad topic list: {exc!r}") from exc
    return names if system else [t for t in names if not is_system_topic(t)]


def route_rows(route: dict[str, Any]) -> list[QueueRow]:
    """A TopicRouteData's queueDatas joined with its brokerDatas' addresses."""
    try:
        addrs = {
            str(b["brokerName"]): {int(k): str(v) for k, v in b["brokerAddrs"].items()}
            for b in route["brokerDatas"]
        }
        rows = [
            QueueRow(
                str(q["brokerName"]),
                int(q["readQueueNums"]),
                int(q["writeQueueNums"]),
                int(q["perm"]),
                addrs.get(str(q["brokerName"]), {}),
            )
            for q in route["queueDatas"]
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdminError(f"the NameServer sent a bad route: {exc!r}") from exc
    return sorted(rows, key=lambda row: row.broker_name)
