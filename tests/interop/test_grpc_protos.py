"""Our own .proto files against the generated code the 5.x client ships: every message, enum
and RPC we define must have the client's names, numbers, types, presence and streaming. We
may define less than the client (RPCs not served yet) and more (fields the protocol added
after 5.1.2), never something different."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.interop
SCRIPT = Path(__file__).with_name("proto_descriptors.py")


def descriptors(*modules: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *modules],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_our_protos_agree_with_the_official_client() -> None:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("rocketmq-python-client is not installed")
    ours = descriptors("pocketmq.grpc.v2.definition_pb2", "pocketmq.grpc.v2.service_pb2")
    theirs = descriptors(
        "rocketmq.grpc_protocol.definition_pb2", "rocketmq.grpc_protocol.service_pb2"
    )
    shared = 0
    for name, members in ours.items():
        if name not in theirs:
            # Newer than 5.1.2: only map entries of fields the client lacks may be missing.
            assert name.endswith("Entry"), f"{name} is not in the official client's protocol"
            continue
        for member, spec in members.items():
            if member in theirs[name]:
                assert theirs[name][member] == spec, (
                    f"{name}.{member}: {spec} != {theirs[name][member]}"
                )
                shared += 1
    assert shared > 250  # most of the protocol is shared, not skipped
    served = ours["apache.rocketmq.v2.MessagingService"]
    assert set(served) == {
        "QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage",
        "AckMessage", "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset",
        "GetOffset", "QueryOffset", "EndTransaction", "Telemetry", "NotifyClientTermination",
        "ChangeInvisibleDuration",
    }  # fmt: skip
