"""Consumer channels expire after ``channel_expired_timeout`` (120 s) without a heartbeat, on a
fake clock: the silent one is closed and dropped, the others are told to rebalance."""

from __future__ import annotations

import asyncio

from fake_transport import FakeTransport, connected_channel
from pocketmq.broker.consumers import ConsumerManager
from pocketmq.clock import FakeClock
from pocketmq.protocol.codes import RequestCode
from pocketmq.remoting import RemotingChannel

EXPIRE_MS = 120_000  # BrokerConfig.channel_expired_timeout
HEARTBEAT = {"groupName": "G", "subscriptionDataSet": [{"topic": "T"}]}


def client() -> tuple[RemotingChannel, FakeTransport]:
    return connected_channel()


async def test_a_channel_expires_120_seconds_after_its_last_heartbeat() -> None:
    clock = FakeClock()
    consumers = ConsumerManager(EXPIRE_MS, clock=clock)
    (a, ta), (b, tb) = client(), client()
    consumers.register(a, "client-a", HEARTBEAT)
    clock.advance(60_000)
    consumers.register(b, "client-b", HEARTBEAT)
    assert consumers.client_ids("G") == ["client-a", "client-b"]
    await asyncio.sleep(0)  # the second notice of the iteration goes out when it ends
    assert ta.codes() == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2

    clock.advance(EXPIRE_MS - 60_000)
    consumers.scan_expired()  # exactly 120 s after a's heartbeat: not yet
    assert consumers.client_ids("G") == ["client-a", "client-b"]
    clock.advance(1)
    consumers.scan_expired()
    assert consumers.client_ids("G") == ["client-b"]
    assert ta.closed and not tb.closed
    await asyncio.sleep(0)
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
