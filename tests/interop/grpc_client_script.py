"""Drive the unmodified 5.x client (``rocketmq-python-client==5.1.2``, gRPC) for
test_grpc_client.py. Runs in its own process: the client's generated protobuf code and
pocketmq's register the same ``apache.rocketmq.v2`` names, so they cannot share one; and the
client writes its logs under $HOME.

Usage: grpc_client_script.py produce ENDPOINT TOPIC DELAY_MS
Prints one JSON object: what was sent, with the message ids the producer reported.

       grpc_client_script.py acl_produce ENDPOINT TOPIC AK SK
       grpc_client_script.py acl_receive ENDPOINT TOPIC GROUP AK SK
With credentials: one send, or one receive (acking what came); prints the message id or the
bodies, or the client's error.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)


def produce(endpoint: str, topic: str, delay_ms: int) -> dict[str, Any]:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        normal = Message()
        normal.topic = topic
        normal.body = b"normal body"
        normal.tag = "TagA"
        normal.keys = "key-1"  # the setter adds one key per assignment
        normal.keys = "key-2"
        normal.add_property("color", "blue")
        normal_receipt = producer.send(normal)

        fifo = Message()
        fifo.topic = topic
        fifo.body = b"fifo body"
        fifo.tag = "TagF"
        fifo.message_group = "group-1"
        fifo_receipt = producer.send(fifo)

        deliver_at_ms = int(time.time() * 1000) + delay_ms
        delayed = Message()
        delayed.topic = topic
        delayed.body = b"delayed body"
        delayed.tag = "TagD"
        delayed.delivery_timestamp = deliver_at_ms
        delayed_receipt = producer.send(delayed)
    finally:
        producer.shutdown()
    return {
        "normal": normal_receipt.message_id,
        "fifo": fifo_receipt.message_id,
        "delayed": delayed_receipt.message_id,
        "deliver_at_ms": deliver_at_ms,
    }


def acl_produce(endpoint: str, topic: str, ak: str, sk: str) -> dict[str, Any]:
    producer = Producer(ClientConfiguration(endpoint, Credentials(ak, sk)), (topic,))
    try:
        producer.startup()
        msg = Message()
        msg.topic = topic
        msg.body = b"from-5x"
        return {"sent": producer.send(msg).message_id}
    except Exception as exc:  # the outcome under test: what the client reports
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        producer.shutdown()


def acl_receive(endpoint: str, topic: str, group: str, ak: str, sk: str) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials(ak, sk))
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
    try:
        consumer.startup()
        bodies = []
        for msg in consumer.receive(16, 15):
            bodies.append(msg.body.decode())
            consumer.ack(msg)
        return {"bodies": bodies}
    except Exception as exc:  # the outcome under test: what the client reports
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        consumer.shutdown()


def main() -> None:
    command, endpoint, topic = sys.argv[1:4]
    if command == "produce":
        result = produce(endpoint, topic, int(sys.argv[4]))
    elif command == "acl_produce":
        result = acl_produce(endpoint, topic, *sys.argv[4:6])
    elif command == "acl_receive":
        result = acl_receive(endpoint, topic, *sys.argv[4:7])
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
