"""Interop with the unmodified official 5.x client (``rocketmq-python-client==5.1.2``, gRPC).

``pocketmq serve`` runs as a real process with its gRPC endpoint on a free port. The 5.x
Producer runs in a subprocess (grpc_client_script.py) and sends a normal message with a tag,
two keys and a user property, a FIFO message with a message group, and a message with a
delivery time. Our 4.x client then reads the topic: bodies, tags, keys, the user property, the
client's message id (UNIQ_KEY) and the sharding key arrive intact, and the timed message not
before its time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from server_procs import ServerProcess

from pocketmq.client import ConsumeFromWhere, LitePullConsumer, MessageExt
from pocketmq.protocol.message import MessageConst

pytestmark = [pytest.mark.interop, pytest.mark.slow]
SCRIPT = Path(__file__).with_name("grpc_client_script.py")
TOPIC = "GrpcInteropTopic"
DELAY_MS = 3_000

if importlib.util.find_spec("rocketmq") is None:
    pytest.skip("rocketmq-python-client is not installed", allow_module_level=True)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[dict[str, int]]:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        ports: dict[str, int] = proc.ready
        yield ports
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


def run(tmp_path: Path, *argv: str) -> str:
    out = subprocess.run(
        argv, capture_output=True, text=True, timeout=90, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},  # the 5.x client logs under ~/logs
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


async def poll_all(namesrv: str, count: int) -> list[tuple[MessageExt, int]]:
    """Every message of the topic with the time (ms) our client got it."""
    consumer = LitePullConsumer(
        "CG_GRPC_INTEROP", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        broker_suspend_ms=1000,
    )  # fmt: skip
    consumer.subscribe(TOPIC)
    got: list[tuple[MessageExt, int]] = []
    async with consumer:
        async with asyncio.timeout(30):
            while len(got) < count:
                polled = await consumer.poll(1)
                now_ms = int(time.time() * 1000)
                got += [(m, now_ms) for m in polled]
    return got


def test_official_producer_to_our_consumer(tmp_path: Path, serve: dict[str, int]) -> None:
    namesrv = f"127.0.0.1:{serve['namesrv']}"
    # 5.x clients need the topic to exist: QueryRoute does not auto-create, as with RocketMQ.
    run(tmp_path, sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv,
        "update-topic", "-t", TOPIC)  # fmt: skip
    sent: dict[str, Any] = json.loads(
        run(tmp_path, sys.executable, str(SCRIPT), "produce",
            f"127.0.0.1:{serve['grpc']}", TOPIC, str(DELAY_MS)).splitlines()[-1]
    )  # fmt: skip

    got = asyncio.run(poll_all(namesrv, 3))
    by_id = {m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: (m, t) for m, t in got}
    assert set(by_id) == {sent["normal"], sent["fifo"], sent["delayed"]}

    normal, _ = by_id[sent["normal"]]
    assert normal.body == b"normal body"
    assert normal.tags == "TagA"
    assert sorted((normal.keys or "").split(" ")) == ["key-1", "key-2"]
    assert normal.properties["color"] == "blue"

    fifo, _ = by_id[sent["fifo"]]
    assert fifo.body == b"fifo body"
    assert fifo.tags == "TagF"
    assert fifo.properties[MessageConst.SHARDING_KEY] == "group-1"

    delayed, received_ms = by_id[sent["delayed"]]
    assert delayed.body == b"delayed body"
    assert delayed.tags == "TagD"
    assert delayed.store_timestamp >= sent["deliver_at_ms"]
    assert received_ms >= sent["deliver_at_ms"]
