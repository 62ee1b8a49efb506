"""A request the peer never answers fails with TimeoutError at its deadline, whatever was sent
before it; answered requests share one expiry timer instead of arming one each; a closed
connection fails what is in flight and drops the timer."""

from __future__ import annotations

import asyncio

import pytest

from fake_transport import connected_channel
from pocketmq.protocol.remoting import FLAG_RESPONSE, RemotingCommand
from pocketmq.remoting import RemotingChannel


def _answer(channel: RemotingChannel, opaque: int) -> None:
    response = RemotingCommand(code=0, opaque=opaque, flag=FLAG_RESPONSE)
    channel.data_received(response.encode())


async def _sent(
    channel: RemotingChannel, timeout_s: float
) -> tuple[asyncio.Task[RemotingCommand], int]:
    """A request in flight, and its opaque."""
    task = asyncio.ensure_future(channel.invoke(RemotingCommand(code=1), timeout_s))
    await asyncio.sleep(0)  # the request is written
    return task, max(channel._pending)


async def test_an_unanswered_request_times_out_and_an_answered_one_does_not() -> None:
    channel, _ = connected_channel()
    late, _ = await _sent(channel, 0.02)
    answered, opaque = await _sent(channel, 0.02)
    _answer(channel, opaque)
    assert (await answered).opaque == opaque
    with pytest.raises(TimeoutError, match=r"no answer within 0\.02 s"):
        await late
    assert not channel._pending


async def test_a_shorter_timeout_after_a_longer_one_expires_first() -> None:
    channel, _ = connected_channel()
    long_wait, long_opaque = await _sent(channel, 30.0)
    short, _ = await _sent(channel, 0.02)
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(TimeoutError):
        await short
    assert loop.time() - began < 5  # at its own deadline, not the long request's
    assert not long_wait.done()
    _answer(channel, long_opaque)
    assert (await long_wait).opaque == long_opaque


async def test_requests_of_one_timeout_share_the_expiry_timer() -> None:
    channel, _ = connected_channel()
    first, opaque = await _sent(channel, 5.0)
    timer = channel._expiry
    assert timer is not None
    for _ in range(20):
        task, later = await _sent(channel, 5.0)
        _answer(channel, later)
        await task
    assert channel._expiry is timer
    _answer(channel, opaque)
    await first


async def test_a_lost_connection_fails_requests_in_flight_and_drops_the_timer() -> None:
    channel, _ = connected_channel()
    task, _ = await _sent(channel, 5.0)
    channel.connection_lost(None)
    with pytest.raises(ConnectionError):
        await task
    assert channel._expiry is None
