"""Send round-trip times, as mqadmin's checkMsgSendRT measures them: messages of a given size
sent to the topic's write queues in turn (SEND_MESSAGE_V2, 310, SendMessageRequestHeaderV2),
each timed from request to answer.

No formatting here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY
from pocketmq.protocol.properties import encode_properties

# The group mqadmin's checkMsgSendRT producer uses is a timestamp; this one says who sent.
PRODUCER_GROUP = "PMQ_ADMIN_SEND_RT"


@dataclass(frozen=True, slots=True)
class WriteQueue:
    broker_name: str
    addr: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class SendSample:
    queue: WriteQueue
    ok: bool
    rt_ms: float
    detail: str  # the broker's remark when not ok


def write_queues(route: dict[str, Any]) -> list[WriteQueue]:
    """Every write queue of a route on a broker with a master, by broker name and queue id."""
    masters = route_masters(route)
    queues = []
    for data in route.get("queueDatas") or []:
        addr = masters.get(str(data.get("brokerName")))
        if addr:
            queues += [WriteQueue(str(data["brokerName"]), addr, q)
                       for q in range(int(data.get("writeQueueNums") or 0))]  # fmt: skip
    return sorted(queues, key=lambda q: (q.broker_name, q.queue_id))


async def topic_write_queues(client: AdminClient, topic: str) -> list[WriteQueue]:
    queues = write_queues(await client.route(topic))
    if not queues:
        raise AdminError(f"the topic {topic} has no writable queue on a master broker")
    return queues


async def send_one(client: AdminClient, queue: WriteQueue, topic: str, body: bytes) -> SendSample:
    """One timed send; a refusal is a sample (not ok, with the broker's remark), an unreachable
    broker an AdminError."""
    now_ms = time.time_ns() // 1_000_000
    header = {
        "a": PRODUCER_GROUP, "b": topic, "c": AUTO_CREATE_TOPIC_KEY, "d": 4, "e": queue.queue_id,
        "f": 0, "g": now_ms, "h": 0, "i": encode_properties({"WAIT": "true"}), "j": 0,
        "k": False, "m": False,
    }  # fmt: skip
    start = time.perf_counter()
    resp = await client.call(queue.addr, RequestCode.SEND_MESSAGE_V2, header, body,
                             ok=tuple(ResponseCode))  # fmt: skip
    rt_ms = (time.perf_counter() - start) * 1000
    ok = resp.code == ResponseCode.SUCCESS
    return SendSample(queue, ok, rt_ms, "" if ok else f"code {resp.code}: {resp.remark or ''}")
