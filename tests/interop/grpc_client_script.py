"""Drive the unmodified 5.x client (``rocketmq-python-client==5.1.2``, gRPC) for
test_grpc_client.py. Runs in its own process: the client's generated protobuf code and
pocketmq's register the same ``apache.rocketmq.v2`` names, so they cannot share one; and the
client writes its logs under $HOME.

Usage: grpc_client_script.py produce ENDPOINT TOPIC DELAY_MS
Prints one JSON object: what was sent, with the message ids the producer reported.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rocketmq import ClientConfiguration, Credentials, Message, Producer


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


def main() -> None:
    command, endpoint, topic, delay_ms = sys.argv[1:5]
    if command != "produce":
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(produce(endpoint, topic, int(delay_ms))), flush=True)


if __name__ == "__main__":
    main()
