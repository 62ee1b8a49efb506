"""Delay levels, consumer retries and dead letters through `pocketmq serve` (a real process
with short delay levels), driven by our client: a delayed message never arrives early, a failed
message comes back with reconsumeTimes + 1 after its level's delay and lands in the group's DLQ
after the maximum, and a broker restart loses no pending delayed message."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import FAST_FROM_FIRST
from server_procs import ServerProcess

from pocketmq.client import (
    ConsumeContext,
    ConsumeOrderlyStatus,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
    message,
    select_by_hash,
)
from pocketmq.errors import BrokerError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration

LEVELS_MS = [300, 600, 400, 500, 600, 700, 800, 900, 1000, 1000, 1000, 1000, 1000, 1000,
             3000, 3000, 3000, 3000]  # fmt: skip


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
        self.broker = f"127.0.0.1:{proc.ready['broker']}"
        return proc

    async def max_offset(self, topic: str, queue_id: int) -> int:
        client = RemotingClient()
        try:
            req = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}
            )
            return int((await client.invoke(self.broker, req, 5)).ext_fields["offset"])
        finally:
            await client.close()


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
        consumer = PushConsumer("CG_DELAY", server.namesrv, listener=listener, **FAST_FROM_FIRST)
        consumer.subscribe("DelayT")
        async with consumer:
            for level in (1, 2, 99):  # 99: above the last level, clamped to it
                body = b"level-%d" % level
                msg = message("DelayT", body, tags="D")
                msg.properties["DELAY"] = str(level)
                sent_at[body] = (time.time(), min(level, len(LEVELS_MS)))
                assert (await producer.send(msg)).status is SendStatus.SEND_OK
            await wait_until(
                lambda: all(b in arrived for b in sent_at), 20, "every delayed message"
            )
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
            "CG_POISON", server.namesrv, listener=listener, max_reconsume_times=2, **FAST_FROM_FIRST
        )
        consumer.subscribe("RetryT")
        async with consumer:
            sent = await producer.send(message("RetryT", b"poison", keys="P1"))
            await wait_until(
                lambda: len(deliveries) >= 3, 30,
                lambda: f"three deliveries: {deliveries} {consumer.held_queues()}",
            )  # fmt: skip
            # The behaviour under test: long enough for a 4th delivery, which must not come.
            await asyncio.sleep(1.5)
    assert [count for _, count, _ in deliveries] == [0, 1, 2]
    assert all(topic == "RetryT" for _, _, topic in deliveries)
    # Retry n waits for level 3 + (n - 1): 400 ms, then 500 ms.
    assert deliveries[1][0] - deliveries[0][0] >= LEVELS_MS[2] / 1000 - 0.005
    assert deliveries[2][0] - deliveries[1][0] >= LEVELS_MS[3] / 1000 - 0.005

    dlq = LitePullConsumer("CG_DLQ_READER", server.namesrv, **FAST_FROM_FIRST)
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


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
async def test_pending_delayed_timer_and_retry_messages_survive_a_broker_restart(
    server: Server, stop: str
) -> None:
    failed = asyncio.Event()

    async def fail_r(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        if any(m.body == b"r" for m in msgs):
            ctx.delay_level = 15  # retried after 3 s: still pending at the restart
            failed.set()
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    wanted: list[bytes] = []
    async with Producer("PG_RESTART", server.namesrv) as producer:
        await producer.send(message("RestartT", b"create"))
        for i in range(20):
            msg = message("RestartT", b"d-%d" % i)
            msg.properties["DELAY"] = str(15 + i % 3)  # 3 s
            await producer.send(msg)
            wanted.append(msg.body)
        for i in range(10):
            msg = message("RestartT", b"t-%d" % i)
            msg.properties["TIMER_DELAY_MS"] = str(3000 + 50 * i)
            await producer.send(msg)
            wanted.append(msg.body)
        consumer = PushConsumer(
            "CG_RESTART_DELAY", server.namesrv, listener=fail_r, **FAST_FROM_FIRST
        )
        consumer.subscribe("RestartT")
        async with consumer:
            await producer.send(message("RestartT", b"r"))
            async with asyncio.timeout(20):
                await failed.wait()

            # Stop once the send-back of r is stored: it waits in level 15 with d-0, d-3 ... d-18.
            async def sent_back() -> bool:
                return await server.max_offset(SCHEDULE_TOPIC, 15 - 1) >= 8

            await wait_until(sent_back, 20, "the send-back of r in delay level 15")
            if stop == "sigkill":
                server.proc.proc.kill()
            assert server.proc.stop() in (0, -9)
    server.proc = server.start()

    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "CG_RESTART_DELAY", server.namesrv, listener=listener, **FAST_FROM_FIRST
    )
    consumer.subscribe("RestartT")
    async with consumer:
        await wait_until(
            lambda: (
                set(wanted) <= {m.body for m in got}
                and any(m.body == b"r" and m.reconsume_times == 1 for m in got)
            ),
            30,
            "every delayed and timer message, and r retried",
        )
        await asyncio.sleep(1.0)  # the behaviour under test: and nothing twice
    bodies = [m.body for m in got if m.body in set(wanted)]
    assert sorted(bodies) == sorted(wanted)  # each delayed and timer message exactly once


async def test_timer_messages_arrive_at_their_time(server: Server) -> None:
    arrived: dict[bytes, float] = {}

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            arrived[m.body] = time.time()
        return ConsumeResult.CONSUME_SUCCESS

    due: dict[bytes, float] = {}
    async with Producer("PG_TIMER", server.namesrv) as producer:
        await producer.send(message("TimerT", b"create"))
        consumer = PushConsumer("CG_TIMER", server.namesrv, listener=listener, **FAST_FROM_FIRST)
        consumer.subscribe("TimerT")
        async with consumer:
            now = time.time()
            cases = {
                b"deliver-ms": ("TIMER_DELIVER_MS", str(int((now + 1.5) * 1000)), now + 1.5),
                b"delay-sec": ("TIMER_DELAY_SEC", "2", now + 2),
                b"delay-ms": ("TIMER_DELAY_MS", "700", now + 0.7),
                b"start-deliver": ("__STARTDELIVERTIME", str(int((now + 1.1) * 1000)), now + 1.1),
                b"past": ("TIMER_DELIVER_MS", str(int((now - 5) * 1000)), now),
            }
            for body, (prop, value, at) in cases.items():
                msg = message("TimerT", body)
                msg.properties[prop] = value
                await producer.send(msg)
                due[body] = at
            await wait_until(lambda: set(due) <= set(arrived), 30, "every timer message")
            with pytest.raises(BrokerError, match="timerMaxDelaySec"):
                msg = message("TimerT", b"too-far")
                msg.properties["TIMER_DELAY_SEC"] = str(4 * 24 * 3600)
                await producer.send(msg)
    for body, at in due.items():
        late = arrived[body] - at
        assert -0.01 <= late < 1.0, (body, late)


async def test_orderly_consumers_keep_per_key_order_while_a_second_one_joins(
    server: Server,
) -> None:
    keys, per_key = 8, 40
    seen: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    arrivals: list[tuple[int, int]] = []  # (key, seq) in the order listeners saw them

    def listener_for(who: int) -> Any:
        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeOrderlyStatus:
            for m in msgs:
                key, seq = map(int, m.body.split(b":"))
                seen[who].append((key, seq))
                arrivals.append((key, seq))
            # The behaviour under test: slow enough that the second consumer joins mid-way.
            await asyncio.sleep(0.002)
            return ConsumeOrderlyStatus.SUCCESS

        return listener

    def consumer(who: int) -> PushConsumer:
        c = PushConsumer(
            "CG_ORDERLY",
            server.namesrv,
            listener=listener_for(who),
            orderly=True,
            **FAST_FROM_FIRST,
        )
        c.subscribe("OrderT")
        return c

    async with Producer("PG_ORDERLY", server.namesrv) as producer:
        await producer.send(message("OrderT", b"-1:-1"))

        async def send_all() -> None:
            for seq in range(per_key):
                for key in range(keys):
                    await producer.send(
                        message("OrderT", b"%d:%d" % (key, seq)), selector=select_by_hash, arg=key
                    )

        first = consumer(0)
        async with first:
            sender = asyncio.create_task(send_all())
            await wait_until(lambda: len(seen[0]) > 40, 30, "the first consumer under way")
            second = consumer(1)
            async with second:
                await sender
                await wait_until(
                    lambda: len({kv for s in seen.values() for kv in s}) > keys * per_key, 30,
                    "every message consumed",
                )  # fmt: skip
                assert second.held_queues()  # it took part
    everything = {kv for s in seen.values() for kv in s if kv[0] >= 0}
    assert everything == {(k, s) for k in range(keys) for s in range(per_key)}
    for key in range(keys):
        seqs = [s for k, s in arrivals if k == key]
        # Across both consumers and the hand-over of queues, a key never goes back: the old
        # owner commits and unlocks before the new one can lock.
        assert all(b >= a for a, b in itertools.pairwise(seqs)), (key, seqs)


async def test_orderly_failure_retries_in_place_then_dead_letters(server: Server) -> None:
    got: list[tuple[bytes, int]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeOrderlyStatus:
        got.extend((m.body, m.reconsume_times) for m in msgs)
        if msgs[0].body == b"bad":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    async with Producer("PG_ORDERLY_FAIL", server.namesrv) as producer:
        q = (await producer.fetch_publish_queues("OrderFailT"))[0]
        for body in (b"a", b"bad", b"c"):
            await producer.send(message("OrderFailT", body), queue=q)
        c = PushConsumer(
            "CG_ORDERLY_FAIL", server.namesrv, listener=listener, orderly=True,
            max_reconsume_times=2, suspend_current_queue_time_ms=100, **FAST_FROM_FIRST,
        )  # fmt: skip
        c.subscribe("OrderFailT")
        async with c:
            await wait_until(lambda: (b"c", 0) in got, 30, "c, after bad was given up")
    assert got == [(b"a", 0), (b"bad", 0), (b"bad", 1), (b"bad", 2), (b"c", 0)]
    dlq = LitePullConsumer("CG_DLQ_READER2", server.namesrv, **FAST_FROM_FIRST)
    dlq.assign([MessageQueue("%DLQ%CG_ORDERLY_FAIL", "broker-a", 0)])
    async with dlq:
        polled: list[MessageExt] = []
        async with asyncio.timeout(20):
            while not polled:
                polled = await dlq.poll(1)
    assert [m.body for m in polled] == [b"bad"]


async def test_a_listener_that_hangs_past_the_consume_timeout_gets_the_message_again(
    server: Server,
) -> None:
    calls: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        if msgs[0].body == b"slow":
            calls.append(msgs[0].reconsume_times)
            if len(calls) == 1:
                await asyncio.sleep(3600)  # hangs: cancelled at the consume timeout
        return ConsumeResult.CONSUME_SUCCESS

    async with Producer("PG_TIMEOUT", server.namesrv) as producer:
        await producer.send(message("TimeoutT", b"slow"))
        c = PushConsumer(
            "CG_TIMEOUT",
            server.namesrv,
            listener=listener,
            consume_timeout_min=0.01,
            **FAST_FROM_FIRST,
        )  # 0.6 s
        c.subscribe("TimeoutT")
        async with c:
            await wait_until(lambda: len(calls) == 2, 30, "the message once more")
    assert calls == [0, 1]
