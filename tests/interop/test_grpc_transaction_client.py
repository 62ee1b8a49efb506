"""Interop: transactions of the unmodified official 5.x client
(``rocketmq-python-client==5.1.2``, gRPC) on ``pocketmq serve``.

A transactional Producer (grpc_consumer_script.py in a subprocess) commits 5 half messages,
rolls 5 back and leaves 1 open; the broker checks the open one back over the producer's
Telemetry stream and the producer's TransactionChecker answers COMMIT. A SimpleConsumer of
another process sees exactly the 5 + 1, each once, and the checker is asked about the open
one only. The topic is created with ``message.type=TRANSACTION``: its route accepts only
transactional messages, which the client checks before sending.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from grpc_consumer_driver import Client, Serve, receive, receive_until, run_cli

pytestmark = [pytest.mark.interop, pytest.mark.slow]

if importlib.util.find_spec("rocketmq") is None:
    pytest.skip("rocketmq-python-client is not installed", allow_module_level=True)

TOPIC = "GrpcTxInteropTopic"
GROUP = "CG_GRPC_TX"
# A half is checked 2 s after its birth, then every second; invisible durations of 5 s need a
# smaller floor than RocketMQ's 10 s.
BROKER_CONF = (
    "transactionTimeOut=2000\ntransactionCheckInterval=1000\nminInvisibleTimeMillsForRecv=1000\n"
)
INVISIBLE_S = 30  # longer than the test: a copy received twice would be a duplicate


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, BROKER_CONF)
    try:
        yield server
    finally:
        assert server.proc.stop() == 0, server.log()


def test_commit_rollback_and_check_back(tmp_path: Path, serve: Serve) -> None:
    run_cli(serve.tmp_path, "admin", "-n", serve.namesrv, "update-topic", "-t", TOPIC,
            "-a", "+message.type=TRANSACTION")  # fmt: skip
    consumer = Client(tmp_path, serve.grpc, "consumer")
    producer = Client(tmp_path, serve.grpc, "producer")
    try:
        consumer.ok("simple", group=GROUP, topic=TOPIC, expr="*", await_s=1)
        assert receive(consumer, INVISIBLE_S) == []  # the group starts at the queues' end
        producer.ok("producer", topics=[TOPIC], check="COMMIT")

        ends = ["COMMIT"] * 5 + ["ROLLBACK"] * 5 + ["OPEN"]
        sent = producer.ok("send", messages=[
            {"topic": TOPIC, "body": f"{end.lower()}-{i}", "transaction": end}
            for i, end in enumerate(ends)
        ])  # fmt: skip
        ids = dict(zip(sent["ids"], ends, strict=True))
        assert all(sent["transaction_ids"]), sent
        expected = {i for i, end in ids.items() if end != "ROLLBACK"}
        open_id = next(i for i, end in ids.items() if end == "OPEN")

        got = receive_until(
            consumer, lambda g: {m["id"] for m in g} >= expected, invisible_s=INVISIBLE_S,
            timeout_s=60,
        )  # fmt: skip
        # Another check interval and more: nothing else may come (no rollback, no duplicate).
        settle_until = time.monotonic() + 3
        got += receive_until(
            consumer, lambda _: time.monotonic() >= settle_until, invisible_s=INVISIBLE_S
        )
        received = [m["id"] for m in got]
        assert sorted(received) == sorted(expected), (received, ids)
        bodies = {m["id"]: m["body"] for m in got}
        assert bodies[open_id] == "open-10"
        assert all(bodies[i].startswith("commit-") for i in expected - {open_id})

        checks = [e["message"] for e in producer.events if e.get("event") == "check"]
        assert {c["id"] for c in checks} == {open_id}, checks
        assert checks[0]["topic"] == TOPIC and checks[0]["body"] == "open-10"
    finally:
        producer.close()
        consumer.close()
