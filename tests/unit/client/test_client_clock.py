"""The client's time-dependent rules on a FakeClock, with no sleeping: broker fault windows,
orderly lock liveness, where a queue taken by timestamp starts, consume start stamps and the
time inside message ids. Brokers are a ClientInstance that answers from a table."""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
from typing import Any

import pytest

from pocketmq.client.consumer_config import (
    DEFAULT_CONSUME_BACK_MS,
    ConsumeFromWhere,
    PushConsumerConfig,
)
from pocketmq.client.fault import LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS, QueueSelector
from pocketmq.client.ids import UniqueIdGenerator
from pocketmq.client.instance import ClientInstance
from pocketmq.client.offset_store import RemoteOffsetStore
from pocketmq.client.orderly import (
    LOCK_INTERVAL_S,
    LOCK_MAX_LIVE_MS,
    ConsumeOrderlyStatus,
    OrderlyService,
    lock_time_ms,
    lock_valid,
)
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.push_consumer import ConsumeContext, ConsumeResult, PushConsumer
from pocketmq.client.route import MessageQueue
from pocketmq.clock import FakeClock
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.remoting import RemotingCommand

MQ = MessageQueue("T", "b", 0)


class TableRemoting:
    """Stands for the connections: answers each request code from a table, keeps the requests."""

    def __init__(self) -> None:
        self.answers: dict[int, RemotingCommand] = {}
        self.requests: list[RemotingCommand] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.requests.append(cmd)
        return self.answers[cmd.code]


class TableBroker(ClientInstance):
    """A client instance whose broker "b" answers from a table."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__("127.0.0.1:9876", "10.0.0.1@test", clock=clock)
        self.broker_addrs["b"] = {0: "127.0.0.1:10911"}
        self.table = TableRemoting()
        self.remoting = self.table  # type: ignore[assignment]

    def answer(
        self, code: int, result: int = ResponseCode.SUCCESS, body: bytes = b"", **fields: Any
    ) -> None:
        self.table.answers[code] = RemotingCommand.request(code).response(
            result, None, fields, body
        )

    def grant_locks(self, *mqs: MessageQueue) -> None:
        body = json_body.dumps({"lockOKMQSet": [mq.to_json() for mq in mqs]})
        self.answer(RequestCode.LOCK_BATCH_MQ, body=body)

    def last(self) -> RemotingCommand:
        return self.table.requests[-1]

    def codes(self) -> list[int]:
        return [cmd.code for cmd in self.table.requests]


# ------------------------------------------------------------------ fault tolerance


@pytest.mark.parametrize(
    ("latency_ms", "window_ms"),
    list(zip(LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS, strict=True)),
)
def test_a_slow_broker_is_out_exactly_for_its_window(latency_ms: int, window_ms: int) -> None:
    clock = FakeClock()
    sel = QueueSelector(send_latency_fault_enable=True, clock=clock)
    sel.update_fault_item("a", latency_ms, isolation=False)
    if window_ms == 0:
        assert sel.fault.is_available("a")
        return
    clock.advance(window_ms - 1)
    assert not sel.fault.is_available("a")
    clock.advance(1)
    assert sel.fault.is_available("a")


def test_a_failed_broker_is_isolated_for_ten_minutes_then_takes_sends_again() -> None:
    clock = FakeClock()
    sel = QueueSelector(send_latency_fault_enable=True, clock=clock)
    mqs = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]
    sel.update_fault_item("a", 3000, isolation=True)  # out for 600 s
    sel.update_fault_item("b", 3000, isolation=False)  # out for 180 s
    # Both out: the least bad (available, then fastest, then back soonest) is still chosen.
    assert {sel.select(mqs, None).broker_name for _ in range(4)} == {"b"}
    clock.advance(180_000)
    assert {sel.select(mqs, None).broker_name for _ in range(8)} == {"b"}
    clock.advance(600_000 - 180_000)
    assert {sel.select(mqs, None).broker_name for _ in range(8)} == {"a", "b"}


# ------------------------------------------------------------------ orderly locks


class OrderlyStub:
    """The push consumer as orderly consumption sees it (OrderlyHost), holding MQ, whose
    broker grants the lock."""

    def __init__(self) -> None:
        self.group = "G"
        self.config = PushConsumerConfig(orderly=True)
        self.clock = FakeClock()
        self.instance = TableBroker(self.clock)
        self.instance.grant_locks(MQ)
        self.offset_store = RemoteOffsetStore(self.instance, self.group)
        self.pq = ProcessQueue(MQ, 0)
        self.process_queues = {MQ: self.pq}
        self.consumed: list[list[MessageExt]] = []
        self.listened = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    @property
    def running(self) -> bool:
        return True

    def track(self, task: asyncio.Task[None]) -> None:
        self.tasks.append(task)

    async def run_listener(self, pq: ProcessQueue, batch: list[MessageExt]) -> Any:
        self.consumed.append(batch)
        self.listened.set()
        return ConsumeOrderlyStatus.SUCCESS

    async def send_to_retry_topic(self, m: MessageExt, reconsume_times: int) -> bool:
        return False


async def test_a_queue_lock_lives_lock_max_live_ms_unless_renewed() -> None:
    host = OrderlyStub()
    orderly, clock, pq = OrderlyService(host), host.clock, host.pq
    assert await orderly.lock(MQ)
    clock.advance(LOCK_MAX_LIVE_MS)
    assert lock_valid(pq, clock)
    clock.advance(1)
    assert not lock_valid(pq, clock)  # consumption of the queue pauses
    await orderly.lock_all()  # the renewal every LOCK_INTERVAL_S
    clock.advance(int(LOCK_INTERVAL_S * 1000))
    assert lock_valid(pq, clock)
    host.instance.grant_locks()  # the broker gave the queue to another client
    await orderly.lock_all()
    assert not pq.locked and not lock_valid(pq, clock)


async def test_an_expired_lock_is_taken_again_before_the_next_batch() -> None:
    host = OrderlyStub()
    orderly, clock, pq = OrderlyService(host), host.clock, host.pq
    pq.put([MessageExt("T", b"x", queue_offset=0)])
    clock.advance(1000)
    orderly.start_queue(pq)  # taken just after may_take locked it
    clock.advance(LOCK_MAX_LIVE_MS + 1)
    try:
        await asyncio.wait_for(host.listened.wait(), 10)
        assert host.instance.codes() == [RequestCode.LOCK_BATCH_MQ]
        assert pq.last_lock_ms == lock_time_ms(clock)  # relocked at the current time
        assert [m.queue_offset for m in host.consumed[0]] == [0]
    finally:
        pq.drop()
        for task in host.tasks:
            task.cancel()
        await asyncio.gather(*host.tasks, return_exceptions=True)


# ------------------------------------------------------------------ push consumer


async def test_consume_from_timestamp_defaults_to_half_an_hour_before_the_take() -> None:
    clock = FakeClock()
    broker = TableBroker(clock)
    broker.answer(RequestCode.QUERY_CONSUMER_OFFSET, ResponseCode.QUERY_NOT_FOUND)
    broker.answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, offset=7)
    consumer = PushConsumer(
        "G", instance=broker, consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    )
    clock.advance(5000)
    assert await consumer.compute_pull_from_where(MQ) == 7
    assert broker.last().code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
    assert broker.last().ext_fields["timestamp"] == str(clock.now_ms() - DEFAULT_CONSUME_BACK_MS)

    given = PushConsumer(
        "G", instance=broker, consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        consume_timestamp_ms=1234,
    )  # fmt: skip
    await given.compute_pull_from_where(MQ)
    assert broker.last().ext_fields["timestamp"] == "1234"


async def test_a_batch_is_stamped_with_its_consume_start_time() -> None:
    clock = FakeClock()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        clock.advance(250)  # the listener's own time does not move the stamp
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("G", instance=TableBroker(clock), listener=listener)
    batch = [MessageExt("T", b"x", queue_offset=0), MessageExt("T", b"y", queue_offset=1)]
    start = clock.now_ms()
    assert await consumer.run_listener(ProcessQueue(MQ, 0), batch) is ConsumeResult.CONSUME_SUCCESS
    assert [m.properties[MessageConst.CONSUME_START_TIMESTAMP] for m in batch] == [str(start)] * 2


# ------------------------------------------------------------------ message ids


def _time_of(msg_id: str) -> int:
    return int(struct.unpack(">I", bytes.fromhex(msg_id)[10:14])[0])


def test_message_ids_count_milliseconds_from_the_start_of_the_month() -> None:
    last_ms_of_january = dt.datetime(2024, 1, 31, 23, 59, 59, 999_000)
    clock = FakeClock(round(last_ms_of_january.timestamp() * 1000))
    gen = UniqueIdGenerator("10.1.2.3", clock=clock)
    since = last_ms_of_january - dt.datetime(2024, 1, 1)
    assert _time_of(gen.next_id()) == since // dt.timedelta(milliseconds=1)
    clock.advance(1)  # February 1st, 00:00:00.000: the count starts again
    assert _time_of(gen.next_id()) == 0
    clock.advance(1500)
    assert _time_of(gen.next_id()) == 1500


def test_a_batch_of_ids_shares_one_time_with_consecutive_counters() -> None:
    clock = FakeClock(1_700_000_000_000)
    gen = UniqueIdGenerator("10.1.2.3", clock=clock)
    first = gen.next_id()
    batch = gen.next_ids(3)
    last = gen.next_id()
    ids = [first, *batch, last]
    raw = [bytes.fromhex(i) for i in ids]
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    assert {r[:14] for r in raw} == {raw[0][:14]}  # ip, pid, random, time: all the same
    counts = [int.from_bytes(r[14:], "big") for r in raw]
    assert counts == [(counts[0] + k) & 0xFFFF for k in range(5)]
    clock.advance(7)
    assert _time_of(gen.next_ids(1)[0]) == _time_of(first) + 7
    assert gen.next_ids(0) == []
