"""pocketmq_server is a new server with an empty store for each test; pocketmq_session_server
is one server for the whole session. The second test checks what the first one left."""

import pytest

from pocketmq.client import BlockingLitePullConsumer, BlockingProducer, message
from pocketmq.errors import ClientError

first: dict[str, object] = {}


def send(server, body):
    with BlockingProducer("audit-producer", server.namesrv_addr) as producer:
        producer.send(message("audit", body))


def test_first(pocketmq_server, pocketmq_session_server):
    send(pocketmq_server, b"per-test")
    send(pocketmq_session_server, b"shared")
    first.update(
        store=pocketmq_server.store_dir,
        pid=pocketmq_server.pid,
        session_pid=pocketmq_session_server.pid,
    )


def test_second(pocketmq_server, pocketmq_session_server):
    assert first, "test_first runs first"
    assert pocketmq_session_server.pid == first["session_pid"]
    assert pocketmq_server.pid != first["pid"]
    assert not first["store"].exists()  # the first test's store was removed
    fresh = BlockingLitePullConsumer("auditors", pocketmq_server.namesrv_addr)
    fresh.subscribe("audit")
    with fresh, pytest.raises(ClientError, match="not exist"):  # the first test's topic
        fresh.fetch_message_queues("audit")
    consumer = BlockingLitePullConsumer("auditors", pocketmq_session_server.namesrv_addr)
    consumer.subscribe("audit")
    with consumer:
        assert [m.body for m in consumer.poll(timeout_s=10)] == [b"shared"]
