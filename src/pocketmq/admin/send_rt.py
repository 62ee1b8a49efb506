"""Send round-trip times, as mqadmin's checkMsgSendRT and clusterRT measure them: messages of
a given size sent to a topic's write queues in turn (SEND_MESSAGE_V2, 310,
SendMessageRequestHeaderV2), each timed from request to answer. checkMsgSendRT sends to one
topic; clusterRT sends to each broker's own topic (named after the broker, which every broker
creates at start). Both leave the first send out of the average: it opens the connection.

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


@dataclass(frozen=True, slots=True)
class BrokerRT:
    """One broker's line of clusterRT: the average round trip and how many sends succeeded."""

    cluster: str
    broker_name: str
    rt_ms: float
    success: int
    fail: int
    detail: str  # the first failure's reason, "" when none failed


def message_body(size: int) -> bytes:
    """The body both mqadmin commands send: size bytes of 'a'."""
    return b"a" * size


def average_rt_ms(samples: list[SendSample]) -> float:
    """The mean round trip without the first send (a warm-up that opens the connection), as
    both mqadmin commands compute it; a lone send is its own average."""
    timed = samples[1:] or samples
    return sum(x.rt_ms for x in timed) / len(timed) if timed else 0.0


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
    """One timed send; a refusal or an unreachable broker is a failed sample with the reason
    (the mqadmin commands count a send that throws as failed and go on)."""
    now_ms = time.time_ns() // 1_000_000
    header = {
        "a": PRODUCER_GROUP, "b": topic, "c": AUTO_CREATE_TOPIC_KEY, "d": 4, "e": queue.queue_id,
        "f": 0, "g": now_ms, "h": 0, "i": encode_properties({"WAIT": "true"}), "j": 0,
        "k": False, "m": False,
    }  # fmt: skip
    start = time.perf_counter()
    try:
        resp = await client.call(queue.addr, RequestCode.SEND_MESSAGE_V2, header, body,
                                 ok=tuple(ResponseCode))  # fmt: skip
    except AdminError as exc:
        return SendSample(queue, False, (time.perf_counter() - start) * 1000, str(exc))
    rt_ms = (time.perf_counter() - start) * 1000
    ok = resp.code == ResponseCode.SUCCESS
    return SendSample(queue, ok, rt_ms, "" if ok else f"code {resp.code}: {resp.remark or ''}")


async def cluster_brokers(client: AdminClient, cluster: str | None) -> list[tuple[str, str]]:
    """(cluster, broker name) of every broker of one cluster or of all, as clusterRT walks
    them; AdminError for a cluster the NameServer does not know."""
    info = await client.cluster_info()
    if cluster is not None and cluster not in info.clusters:
        known = ", ".join(sorted(info.clusters)) or "none"
        raise AdminError(f"cluster {cluster} does not exist (known clusters: {known})")
    names = [cluster] if cluster is not None else sorted(info.clusters)
    return [(c, b) for c in names for b in info.clusters[c]]


async def broker_rt(
    client: AdminClient, cluster: str, broker_name: str, amount: int, body: bytes
) -> BrokerRT:
    """amount sends to the topic named after the broker (clusterRT's target); a topic without
    a route or writable queue counts every send as failed, as the producer's sends would."""
    try:
        queues = await topic_write_queues(client, broker_name)
    except AdminError as exc:
        return BrokerRT(cluster, broker_name, 0.0, 0, amount, str(exc))
    samples = [await send_one(client, queues[i % len(queues)], broker_name, body)
               for i in range(amount)]  # fmt: skip
    success = sum(x.ok for x in samples)
    detail = next((x.detail for x in samples if not x.ok), "")
    return BrokerRT(cluster, broker_name, average_rt_ms(samples), success,
                    amount - success, detail)  # fmt: skip
