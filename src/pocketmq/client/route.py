"""Message queues and topic routes as clients see them. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pocketmq.protocol.names import MASTER_ID, PERM_READ, PERM_WRITE


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


@dataclass(frozen=True, slots=True)
class FoundBroker:
    """A broker a consumer talks to (FindBrokerResult): its address and whether it is a
    slave (pulls from a slave carry no offset to commit)."""

    addr: str
    slave: bool


def find_broker_in_subscribe(
    addrs: dict[int, str], broker_id: int, only_this_broker: bool
) -> FoundBroker | None:
    """MQClientInstance.findBrokerAddressInSubscribe over one brokerName's ``addrs``: the
    broker ``broker_id``; for a slave id that is missing, the next id; else, unless
    ``only_this_broker``, the broker with the lowest id (the master when there is one)."""
    addr = addrs.get(broker_id)
    if addr is not None:
        return FoundBroker(addr, broker_id != MASTER_ID)
    if broker_id != MASTER_ID and (addr := addrs.get(broker_id + 1)) is not None:
        return FoundBroker(addr, True)
    if only_this_broker or not addrs:
        return None
    lowest = min(addrs)
    return FoundBroker(addrs[lowest], lowest != MASTER_ID)


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

    def any_broker(self, broker_name: str) -> str | None:
        """BrokerData.selectBrokerAddr: the master, else one of its slaves (all of them know
        the group's consumers and its client configs)."""
        found = find_broker_in_subscribe(self.broker_addrs.get(broker_name, {}), MASTER_ID, False)
        return None if found is None else found.addr
