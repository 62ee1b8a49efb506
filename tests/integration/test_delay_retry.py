"""Delay levels, consumer retries and dead letters through `pocketmq serve` (a real process
with short delay levels), driven by our client: a delayed message never arrives early, a failed
message comes back with reconsumeTimes + 1 after its level's delay and lands in the group's DLQ
after the maximum, and a broker restart loses no pending delayed message."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_procs import ServerProcess

from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
    message,
)

pytestmark = pytest.mark.integration

LEVELS_MS = [300, 600, 400, 500, 600, 700, 800, 900, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
             1000, 1000, 1000]  # fmt: skip
FAST: dict[str, Any] = {
    "rebalance_interval_s": 1.0,
    "persist_interval_s": 0.5,
    "broker_suspend_ms": 1000,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


class Server:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.conf = workdir / "broker.conf"
        levels = " ".join(f"{ms}ms" for ms in LEVELS_MS)
        self.conf.write_text(f"messageDelayLevel={levels}\nflushDelayOffsetInterval=200\n")
        self.proc = self.start()

    def start(self) -> ServerProcess:
        proc = ServerProcess(
            "serve", self.workdir, "-c", str(self.conf), "--namesrv-port", "0",
            "--broker-port", "0", listen=False,
        )  # fmt: skip
        self.namesrv = f"127.0.0.1:{proc.ready['namesrv']}"
        return proc


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    try:
        yield s
    finally:
        assert s.proc.stop() == 0, s.proc.log_path.read_text()


async def test_delayed_messages_arrive_after_their_delay_and_never_before(server: Server) -> None:
    arrived: dict[bytes, float] = {}

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            arrived[m.body] = time.time()
            assert m.topic == "DelayT" and "DELAY" not in m.properties
        return ConsumeResult.CONSUME_SUCCESS

    sent_at: dict[bytes, tuple[float, int]] = {}
    async with Producer("PG_DELAY", server.namesrv) as producer:
        await producer.send(message("DelayT", b"create"))
        consumer = PushConsumer("CG_DELAY", server.namesrv, listener=listener, **FAST)
        consumer.subscribe("DelayT")
        async with consumer:
            for level in (1, 2, 99):  # 99: above the last level, clamped to it
                body = b"level-%d" % level
                msg = message("DelayT", body, tags="D")
                msg.properties["DELAY"] = str(level)
                sent_at[body] = (time.time(), min(level, len(LEVELS_MS)))
                assert (await producer.send(msg)).status is SendStatus.SEND_OK
            async with asyncio.timeout(20):
                while not all(b in arrived for b in sent_at):
                    await asyncio.sleep(0.02)
    for body, (t0, level) in sent_at.items():
        delay_s = arrived[body] - t0
        assert delay_s >= LEVELS_MS[level - 1] / 1000 - 0.005, (body, delay_s)
        assert delay_s < LEVELS_MS[level - 1] / 1000 + 2.0, (body, delay_s)


async def test_failed_message_is_retried_with_growing_count_then_dead_lettered(
    server: Server,
) -> None:
    deliveries: list[tuple[float, int, str]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            if m.body == b"poison":
                deliveries.append((time.time(), m.reconsume_times, m.topic))
                return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    async with Producer("PG_RETRY", server.namesrv) as producer:
        await producer.send(message("RetryT", b"create"))
        consumer = PushConsumer(
            "CG_POISON", server.namesrv, listener=listener, max_reconsume_times=2, **FAST
        )
        consumer.subscribe("RetryT")
        async with consumer:
            sent = await producer.send(message("RetryT", b"poison", keys="P1"))
            try:
                async with asyncio.timeout(30):
                    while len(deliveries) < 3:
                        await asyncio.sleep(0.02)
            except TimeoutError:
                raise AssertionError(f"{deliveries} {consumer.held_queues()}") from None
            await asyncio.sleep(1.5)  # long enough for a 4th delivery, which must not come
    assert [count for _, count, _ in deliveries] == [0, 1, 2]
    assert all(topic == "RetryT" for _, _, topic in deliveries)
    # Retry n waits for level 3 + (n - 1): 400 ms, then 500 ms.
    assert deliveries[1][0] - deliveries[0][0] >= LEVELS_MS[2] / 1000 - 0.005
    assert deliveries[2][0] - deliveries[1][0] >= LEVELS_MS[3] / 1000 - 0.005

    dlq = LitePullConsumer("CG_DLQ_READER", server.namesrv, **FAST)
    dlq.assign([MessageQueue("%DLQ%CG_POISON", "broker-a", 0)])
    async with dlq:
        polled: list[MessageExt] = []
        async with asyncio.timeout(20):
            while not polled:
                polled = await dlq.poll(1)
    [dead] = polled
    assert dead.body == b"poison" and dead.reconsume_times == 3
    assert dead.properties["RETRY_TOPIC"] == "RetryT"
    assert dead.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id == dead.uniq_key
    assert dead.keys == "P1"


async def test_pending_delayed_messages_survive_a_broker_restart(server: Server) -> None:
    async with Producer("PG_RESTART", server.namesrv) as producer:
        await producer.send(message("RestartT", b"create"))
        for i in range(20):
            msg = message("RestartT", b"d-%d" % i)
            msg.properties["DELAY"] = str(10 + i % 3)  # 1 s: still pending at the restart
            await producer.send(msg)
    assert server.proc.stop() == 0
    server.proc = server.start()

    got: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("CG_RESTART_DELAY", server.namesrv, listener=listener, **FAST)
    consumer.subscribe("RestartT")
    async with consumer:
        async with asyncio.timeout(20):
            while len(got) < 21:
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # and nothing twice
    assert sorted(got) == sorted([b"create"] + [b"d-%d" % i for i in range(20)])
