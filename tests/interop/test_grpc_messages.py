"""Our v2 messages (``pocketmq.grpc.messages``) as the unmodified 5.x client decodes them with
``Message.fromProtobuf``: the body digest checks out, and body, ids, tag, keys, group, type,
hosts, timestamps and user properties read as the broker stored them. The client runs in a
subprocess: its generated code and ours register the same protobuf names."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from pocketmq.grpc.messages import v2_message
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag

pytestmark = pytest.mark.interop

READ = """
import json, sys
from rocketmq.grpc_protocol import definition_pb2
from rocketmq.v5.model.message import Message

m = Message().fromProtobuf(definition_pb2.Message.FromString(sys.stdin.buffer.read()))
print(json.dumps({
    "corrupted": m.corrupted, "body": m.body.decode(), "topic": m.topic,
    "message_id": m.message_id, "tag": m.tag, "keys": sorted(m.keys),
    "message_group": m.message_group, "message_type": m.message_type,
    "delivery_timestamp": m.delivery_timestamp, "born_timestamp": m.born_timestamp,
    "born_host": m.born_host, "delivery_attempt": m.delivery_attempt,
    "properties": m.properties,
}))
"""


def client_reads(message: pb.Message, home: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", READ], input=message.SerializeToString(), capture_output=True,
        timeout=60, cwd=home, env={**os.environ, "HOME": str(home)},  # the client logs in ~/logs
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_5x_client_reads_our_messages(tmp_path: Path) -> None:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("rocketmq-python-client is not installed")
    body = "compressed by a 4.x producer " * 50
    msg = MessageExt(
        topic="Orders",
        body=zlib.compress(body.encode()),
        sys_flag=SysFlag.COMPRESSED,
        properties={
            MessageConst.TAGS: "TagA",
            MessageConst.KEYS: "k1 k2",
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "7F0000010001",
            MessageConst.SHARDING_KEY: "customer-42",
            MessageConst.TIMER_OUT_MS: "1700000009000",
            "color": "blue",
        },
        born_timestamp=1_700_000_000_123,
        born_host=("192.168.1.9", 50123),
        reconsume_times=2,
    )
    read = client_reads(v2_message(msg, queue_id=1, queue_offset=9), tmp_path)
    assert read == {
        "corrupted": False,
        "body": body,
        "topic": "Orders",
        "message_id": "7F0000010001",
        "tag": "TagA",
        "keys": ["k1", "k2"],
        "message_group": "customer-42",
        "message_type": pb.DELAY,
        "delivery_timestamp": 1_700_000_009_000,
        "born_timestamp": 1_700_000_000_123,
        "born_host": "192.168.1.9",
        "delivery_attempt": 3,
        "properties": {"color": "blue"},
    }
