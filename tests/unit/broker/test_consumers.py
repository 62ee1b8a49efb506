"""Consumer channels expire after ``channel_expired_timeout`` (120 s) without a heartbeat, on a
fake clock: the silent one is closed and dropped, the others are told to rebalance."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.broker.consumers import ConsumerManager
from pocketmq.clock import FakeClock
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

EXPIRE_MS = 120_000  # BrokerConfig.channel_expired_timeout
HEARTBEAT = {"groupName": "G", "subscriptionDataSet": [{"topic": "T"}]}


class FakeTransport(asyncio.Transport):
    """Keeps what the broker writes to one client and whether it closed the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def codes(self) -> list[int]:
        """Request codes sent to the client so far."""
        conn = RemotingConnection()
        conn.receive_data(bytes(self.written))
        out = []
        while (cmd := conn.next_command()) is not NEED_DATA:
            assert isinstance(cmd, RemotingCommand)
            out.append(cmd.code)
        return out


def client() -> tuple[RemotingChannel, FakeTransport]:
    channel, transport = RemotingChannel(), FakeTransport()
    channel.connection_made(transport)
    return channel, transport


async def test_a_channel_expires_120_seconds_after_its_last_heartbeat() -> None:
    clock = FakeClock()
    consumers = ConsumerManager(EXPIRE_MS, clock=clock)
    (a, ta), (b, tb) = client(), client()
    consumers.register(a, "client-a", HEARTBEAT)
    clock.advance(60_000)
    consumers.register(b, "client-b", HEARTBEAT)
    assert consumers.client_ids("G") == ["client-a", "client-b"]
    assert ta.codes() == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2

    clock.advance(EXPIRE_MS - 60_000)
    consumers.scan_expired()  # exactly 120 s after a's heartbeat: not yet
    assert consumers.client_ids("G") == ["client-a", "client-b"]
    clock.advance(1)
    consumers.scan_expired()
    assert consumers.client_ids("G") == ["client-b"]
    assert ta.closed and not tb.closed
    assert tb.codes() == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2  # joined, a left


async def test_a_heartbeat_renews_and_the_last_expiry_removes_the_group() -> None:
    clock = FakeClock()
    consumers = ConsumerManager(EXPIRE_MS, clock=clock)
    a, ta = client()
    consumers.register(a, "client-a", HEARTBEAT)
    clock.advance(100_000)
    consumers.register(a, "client-a", HEARTBEAT)  # renewed: the members did not change
    assert ta.codes() == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    clock.advance(100_000)
    consumers.scan_expired()
    assert consumers.client_ids("G") == ["client-a"]
    clock.advance(EXPIRE_MS)
    consumers.scan_expired()
    assert consumers.client_ids("G") == [] and "G" not in consumers.groups
    assert ta.closed
