"""broker/metrics.py: the rpc latency histogram and the timing of remoting requests."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pocketmq.broker.metrics import RPC_LATENCY_BUCKETS_MS, RpcLatency, TimedDispatcher
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import RemotingCommand


def test_observations_land_in_rocketmqs_buckets() -> None:
    latency = RpcLatency()
    for ms in (0.5, 1.0, 4.0, 50.0, 5000.0):
        latency.observe("remoting", 10, 0, ms)
    counts = latency.series[("remoting", 10, 0)]
    assert len(counts) == len(RPC_LATENCY_BUCKETS_MS) + 2
    # le=1 holds 0.5 and 1.0; le=5 holds 4.0; le=100 holds 50; +Inf holds 5000.
    assert counts[0] == 2 and counts[2] == 1 and counts[5] == 1 and counts[-2] == 1
    assert counts[-1] == pytest.approx(5055.5)


async def test_each_request_is_timed_with_its_response_code() -> None:
    latency = RpcLatency()
    dispatcher = TimedDispatcher(latency)
    channel: Any = SimpleNamespace(peer="127.0.0.1:1")  # what the unsupported-code log reads

    def sync_ok(ch: Any, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS)

    async def async_refused(ch: Any, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        raise RequestError(ResponseCode.TOPIC_NOT_EXIST, "no")

    def sync_refused(ch: Any, cmd: RemotingCommand) -> RemotingCommand:
        raise RequestError(ResponseCode.NO_PERMISSION, "no")

    dispatcher.register(10, sync_ok)
    dispatcher.register(11, async_refused)
    dispatcher.register(12, sync_refused)
    assert dispatcher(channel, RemotingCommand.request(10, {})).code == 0  # type: ignore[union-attr]
    pending = dispatcher(channel, RemotingCommand.request(11, {}))
    with pytest.raises(RequestError):
        await pending  # type: ignore[misc]
    with pytest.raises(RequestError):
        dispatcher(channel, RemotingCommand.request(12, {}))
    unknown = dispatcher(channel, RemotingCommand.request(999, {}))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED  # type: ignore[union-attr]
    assert {key: int(sum(c[:-1])) for key, c in latency.series.items()} == {
        ("remoting", 10, ResponseCode.SUCCESS): 1,
        ("remoting", 11, ResponseCode.TOPIC_NOT_EXIST): 1,
        ("remoting", 12, ResponseCode.NO_PERMISSION): 1,
        ("remoting", 999, ResponseCode.REQUEST_CODE_NOT_SUPPORTED): 1,
    }
