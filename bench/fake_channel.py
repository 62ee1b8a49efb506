"""What the in-process send benchmarks share (send_cpu_bench.py, send_handler_bench.py): a
transport stub for a RemotingChannel with no socket, and a Producer whose route and broker
connection are faked, so that its sends go to such a channel."""

from __future__ import annotations

from typing import Any

from pocketmq.client import Producer
from pocketmq.client.route import MessageQueue, TopicRoute
from pocketmq.remoting.channel import RemotingChannel

BROKER = "127.0.0.1:10911"
TOPIC = "BenchTopic"


class NullTransport:
    """What a RemotingChannel asks of its transport besides writes: open, a peer, no flow
    control to apply. Subclasses say what becomes of the writes."""

    peer = ("127.0.0.1", 10911)

    def write(self, data: bytes) -> None:
        pass

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(parts))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


def faked_producer(channel: RemotingChannel, queues: int = 4) -> Producer:
    """A Producer as if started, with TOPIC's route (one broker, ``queues`` queues) fetched and
    ``channel`` its open connection to that broker: its sends are written to ``channel``."""
    producer = Producer("bench_producer", "127.0.0.1:9876")
    producer.instance.remoting._channels[BROKER] = channel
    producer.instance.broker_addrs["broker-a"] = {0: BROKER}
    route = [MessageQueue(TOPIC, "broker-a", i) for i in range(queues)]
    producer._publish[TOPIC] = TopicRoute(TOPIC, {"broker-a": {0: BROKER}}, route, [])
    producer._started = True
    return producer
