"""broker/metrics.py: the rpc latency histogram, the timing of remoting requests and RocketMQ
5's labels on the message counters."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pocketmq.broker.metrics import (
    RPC_LATENCY_BUCKETS_MS,
    BrokerCollector,
    RpcLatency,
    TimedDispatcher,
)
from pocketmq.broker.stats import (
    GROUP_GET_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    Protocol,
)
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.pending import Pending
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.names import pop_retry_topic
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.topic_attributes import TopicMessageType


async def test_each_request_of_a_run_is_timed_with_its_response_code() -> None:
    latency = RpcLatency()
    dispatcher = TimedDispatcher(latency)
    channel: Any = SimpleNamespace(peer="127.0.0.1:1")
    later: Pending[RemotingCommand] = Pending()

    def run(ch: Any, cmds: list[RemotingCommand]) -> list[Any]:
        return [
            cmds[0].response(ResponseCode.SUCCESS),
            RequestError(ResponseCode.NO_PERMISSION, "no"),
            RuntimeError("broken"),  # answered SYSTEM_ERROR by the channel, which logs it
            later,
        ]

    dispatcher.register(10, lambda ch, cmd: cmd.response(ResponseCode.SUCCESS), run)
    assert dispatcher.run_codes == frozenset({10})
    results = dispatcher.handle_run(channel, [RemotingCommand.request(10, {}) for _ in range(4)])
    assert isinstance(results[1], RequestError) and isinstance(results[2], RuntimeError)
    timed = results[3]
    assert isinstance(timed, Pending) and timed is not later
    passed_on: list[RemotingCommand | Exception] = []
    timed.then = passed_on.append
    later.then(RemotingCommand.request(10, {}).response(ResponseCode.SYSTEM_BUSY))
    assert len(passed_on) == 1
    assert {key: int(sum(c[:-1])) for key, c in latency.series.items()} == {
        ("remoting", 10, ResponseCode.SUCCESS): 1,
        ("remoting", 10, ResponseCode.NO_PERMISSION): 1,
        ("remoting", 10, ResponseCode.SYSTEM_BUSY): 1,
    }


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

    def later(outcome: RemotingCommand | Exception) -> Pending[RemotingCommand]:
        pending: Pending[RemotingCommand] = Pending()
        asyncio.get_running_loop().call_soon(lambda: pending.then(outcome))
        return pending

    dispatcher.register(10, sync_ok)
    dispatcher.register(11, async_refused)
    dispatcher.register(12, sync_refused)
    dispatcher.register(13, lambda ch, cmd: later(cmd.response(ResponseCode.SYSTEM_BUSY)))
    dispatcher.register(14, lambda ch, cmd: later(RequestError(ResponseCode.NO_MESSAGE, "no")))
    assert dispatcher(channel, RemotingCommand.request(10, {})).code == 0  # type: ignore[union-attr]
    pending = dispatcher(channel, RemotingCommand.request(11, {}))
    with pytest.raises(RequestError):
        await pending  # type: ignore[misc]
    with pytest.raises(RequestError):
        dispatcher(channel, RemotingCommand.request(12, {}))
    for code in (13, 14):  # answered by a callback: timed until then, and passed on
        outcome: asyncio.Future[RemotingCommand | Exception] = asyncio.Future()
        answer = dispatcher(channel, RemotingCommand.request(code, {}))
        assert isinstance(answer, Pending)
        answer.then = outcome.set_result
        assert not any(key[1] == code for key in latency.series)
        passed_on = await outcome
        assert isinstance(passed_on, RemotingCommand if code == 13 else RequestError)
    unknown = dispatcher(channel, RemotingCommand.request(999, {}))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED  # type: ignore[union-attr]
    assert {key: int(sum(c[:-1])) for key, c in latency.series.items()} == {
        ("remoting", 10, ResponseCode.SUCCESS): 1,
        ("remoting", 11, ResponseCode.TOPIC_NOT_EXIST): 1,
        ("remoting", 12, ResponseCode.NO_PERMISSION): 1,
        ("remoting", 13, ResponseCode.SYSTEM_BUSY): 1,
        ("remoting", 14, ResponseCode.NO_MESSAGE): 1,
        ("remoting", 999, ResponseCode.REQUEST_CODE_NOT_SUPPORTED): 1,
    }


def _series(family: Any) -> dict[tuple[str, ...], float]:
    """label values without the common ones (cluster, node_type, node_id) -> value."""
    common = {"cluster", "node_type", "node_id"}
    return {
        tuple(v for k, v in sample.labels.items() if k not in common): sample.value
        for sample in family.samples
    }


def test_message_counters_carry_rocketmq_5_labels() -> None:
    stats = BrokerStatsManager("ClusterX", FakeClock())
    config = SimpleNamespace(broker_cluster_name="ClusterX", broker_name="broker-a")
    collector = BrokerCollector(SimpleNamespace(config=config, stats=stats), RpcLatency())  # type: ignore[arg-type]
    stats.on_put("T", 3, 300)
    stats.on_put("T", 2, 200, Protocol.REMOTING, TopicMessageType.DELAY)
    stats.on_put("T", 1, 100, Protocol.GRPC, TopicMessageType.FIFO)
    stats.on_put("broker-a", 4, 400)  # clusterRT's topic: a system topic of the broker
    stats.on_put("%RETRY%G", 1, 10)  # sends back are not messages in (SendMessageProcessor)
    stats.on_put("%DLQ%G", 1, 10)
    puts = _series(collector._in_counter("rocketmq_messages_in", "", stats.sets[TOPIC_PUT_NUMS]))
    # (topic, message_type, is_system, protocol_type)
    assert puts == {
        ("T", "normal", "false", "remoting"): 3,
        ("T", "delay", "false", "remoting"): 2,
        ("T", "fifo", "false", "grpc"): 1,
        ("broker-a", "normal", "true", "remoting"): 4,
    }
    size = _series(collector._in_counter("rocketmq_throughput_in", "", stats.sets[TOPIC_PUT_SIZE]))
    assert size[("T", "delay", "false", "remoting")] == 200

    stats.on_get("G", "T", 4, 40, 1)
    stats.on_get("G", pop_retry_topic("G", "T"), 2, 20, 1, Protocol.GRPC)
    stats.on_get("G", "%RETRY%G", 5, 50, 1)  # a 4.x retry pull: left out, as RocketMQ does
    stats.on_get("CID_RMQ_SYS_X", "T", 1, 10, 1)
    gets = _series(collector._out_counter("rocketmq_messages_out", "", stats.sets[GROUP_GET_NUMS]))
    # (topic, consumer_group, is_system, is_retry, protocol_type)
    assert gets == {
        ("T", "G", "false", "false", "remoting"): 4,
        ("T", "G", "false", "true", "grpc"): 2,
        ("T", "CID_RMQ_SYS_X", "true", "false", "remoting"): 1,
    }
