"""client/blocking.py: a blocking consumer that was never started leaves no connection open
when it shuts down, whatever it asked before (a fake NameServer on a loopback socket)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pocketmq.client.blocking import BlockingLitePullConsumer
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import RemotingCommand

ROUTE = {
    "brokerDatas": [{"cluster": "C", "brokerName": "b", "brokerAddrs": {"0": "127.0.0.1:1"}}],
    "queueDatas": [{"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                    "topicSysFlag": 0}],
}  # fmt: skip


@contextmanager
def fake_namesrv() -> Iterator[tuple[str, threading.Event]]:
    """Serves one connection: answers route queries with ROUTE; the event is set when the
    client closes the connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    closed = threading.Event()

    def serve() -> None:
        sock, _ = listener.accept()
        conn = RemotingConnection()
        with sock:
            while data := sock.recv(65536):
                conn.receive_data(data)
                while (cmd := conn.next_command()) is not NEED_DATA:
                    assert isinstance(cmd, RemotingCommand)
                    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
                    body = json.dumps(ROUTE).encode()
                    sock.sendall(conn.send(cmd.response(ResponseCode.SUCCESS, body=body)))
        closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", closed
    finally:
        listener.close()


def test_shutdown_of_a_never_started_lite_pull_consumer_closes_its_namesrv_connection() -> None:
    with fake_namesrv() as (addr, closed):
        consumer = BlockingLitePullConsumer("G", addr)
        queues = consumer.fetch_message_queues("T")
        assert [(q.broker_name, q.queue_id) for q in queues] == [("b", 0), ("b", 1)]
        # A connection left open also hung the loop's close (uvloop): shut down on a
        # daemon thread, so that a regression fails here instead of hanging the run.
        stopping = threading.Thread(target=consumer.shutdown, daemon=True)
        stopping.start()
        stopping.join(10)
        assert not stopping.is_alive(), "shutdown hung"
        assert closed.wait(10), "the NameServer connection was left open"
