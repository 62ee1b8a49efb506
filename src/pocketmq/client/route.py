"""Message queues, topic routes as clients see them, and queue allocation among consumers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pocketmq.protocol.names import PERM_READ, PERM_WRITE

MASTER_ID = 0


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker. Ordered like Java's: topic, broker, queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MessageQueue:
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


@dataclass(slots=True)
class TopicRoute:
    """A topic's route from the NameServer, turned into the queues producers and consumers use.

    Queues of brokers without a master are not writable: a send must go to a master.
    """

    topic: str
    broker_addrs: dict[str, dict[int, str]]
    write_queues: list[MessageQueue] = field(default_factory=list)
    read_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False

    @classmethod
    def from_json(cls, topic: str, data: dict[str, Any]) -> TopicRoute:
        """Parse TopicRouteData.

        Raises:
            KeyError, TypeError, ValueError: the route is malformed.
        """
        addrs = {
            str(b["brokerName"]): {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()}
            for b in data.get("brokerDatas") or []
        }
        route = cls(topic, addrs, order_topic=bool(data.get("orderTopicConf")))
        for qd in sorted(data.get("queueDatas") or [], key=lambda q: str(q["brokerName"])):
            name, perm = str(qd["brokerName"]), int(qd["perm"])
            if perm & PERM_WRITE and MASTER_ID in addrs.get(name, {}):
                route.write_queues += [
                    MessageQueue(topic, name, i) for i in range(int(qd["writeQueueNums"]))
                ]
            if perm & PERM_READ:
                route.read_queues += [
                    MessageQueue(topic, name, i) for i in range(int(qd["readQueueNums"]))
                ]
        return route

    def master(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)


# (consumer group, this client's id, every queue, every client id) -> this client's queues
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def allocate_averagely(
    group: str, client_id: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely: contiguous ranges, the first ``len % n`` clients get one
    more. Every client of a group must compute the same answer, so both lists come sorted."""
    if client_id not in cid_all or not mq_all:
        return []
    index = cid_all.index(client_id)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    size = 1 if n_mq <= n_cid else n_mq // n_cid + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


def allocate_by_circle(
    group: str, client_id: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle: queue i goes to client i % n."""
    if client_id not in cid_all:
        return []
    index = cid_all.index(client_id)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]
