"""Our client (pocketmq.client) against `pocketmq serve` as a real process: every kind of send,
push consumers (tag filters, offsets across restarts, broadcasting, rebalancing, retries), the
lite pull consumer and the blocking facade."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import FAST, FAST_FROM_FIRST, Collector
from server_procs import ServerProcess

from pocketmq.client import (
    BlockingLitePullConsumer,
    BlockingProducer,
    BlockingPushConsumer,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    MessageModel,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
    message,
    rebalance,
    select_by_hash,
)
from pocketmq.errors import ClientError
from waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("serve")
    proc = ServerProcess(
        "serve", workdir, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        yield f"127.0.0.1:{proc.ready['namesrv']}"
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return "T_" + request.node.name.replace("[", "_").replace("]", "")[:60]


@pytest.fixture
async def producer(server: str) -> AsyncIterator[Producer]:
    async with Producer("PG_TEST", server) as p:
        yield p


async def test_every_kind_of_send_is_consumed_once_and_tags_filter(
    server: str, producer: Producer, topic: str
) -> None:
    sent: dict[bytes, str] = {}
    for i in range(12):
        tag = "TagA" if i % 3 == 0 else "TagB" if i % 3 == 1 else "TagC"
        result = await producer.send(message(topic, b"sync-%d" % i, tags=tag, keys=f"k{i}"))
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id and result.offset_msg_id and result.queue_offset >= 0
        sent[b"sync-%d" % i] = tag
    for i in range(4):
        await producer.send_oneway(message(topic, b"oneway-%d" % i, tags="TagA"))
        sent[b"oneway-%d" % i] = "TagA"
    batch = [message(topic, b"batch-%d" % i, tags="TagB") for i in range(5)]
    result = await producer.send_batch(batch)
    assert result.status is SendStatus.SEND_OK and len(result.msg_id.split(",")) == 5
    sent.update({m.body: "TagB" for m in batch})
    queues = []
    for i in range(6):
        r = await producer.send(
            message(topic, b"order-%d" % i, tags="TagA"), selector=select_by_hash, arg="order-1"
        )
        queues.append(r.message_queue)
        sent[b"order-%d" % i] = "TagA"
    assert len(set(queues)) == 1  # one key, one queue

    collector = Collector()
    consumer = PushConsumer(
        "CG_TAGS", server, listener=collector,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic, "TagA || TagB")
    async with consumer:
        want = sorted(b for b, tag in sent.items() if tag in ("TagA", "TagB"))
        await collector.wait_for(len(want))
        await asyncio.sleep(0.5)  # the behaviour under test: nothing more may come
    assert collector.bodies() == want
    assert all(m.tags in ("TagA", "TagB") and m.topic == topic for m in collector.got)
    ordered = [m.body for m in collector.got if m.body.startswith(b"order-")]
    assert ordered == [b"order-%d" % i for i in range(6)]


async def test_pulled_messages_reach_the_listener_before_the_next_pull_goes_out(
    server: str, producer: Producer, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, int]] = []
    real_pull = rebalance.pull

    async def recording_pull(*args: Any, **kwargs: Any) -> Any:
        events.append(("pull", args[3].queue_id))
        return await real_pull(*args, **kwargs)

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        events.append(("listen", msgs[0].queue_id))
        return ConsumeResult.CONSUME_SUCCESS

    monkeypatch.setattr(rebalance, "pull", recording_pull)
    queue_id = (await producer.send(message(topic, b"one"))).message_queue.queue_id
    consumer = PushConsumer("CG_TURNS", server, listener=listener, **FAST_FROM_FIRST)
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(
            lambda: events.count(("pull", queue_id)) >= 2, 10, "the queue's second pull"
        )
    mine = [kind for kind, q in events if q == queue_id]
    assert mine[:3] == ["pull", "listen", "pull"]


async def test_offsets_survive_a_consumer_restart(
    server: str, producer: Producer, topic: str
) -> None:
    await producer.send_batch([message(topic, b"first-%d" % i) for i in range(10)])
    first = Collector()
    consumer = PushConsumer(
        "CG_RESTART", server, listener=first,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    async with consumer:
        await first.wait_for(10)
    for i in range(10):
        await producer.send(message(topic, b"second-%d" % i))
    second = Collector()
    consumer = PushConsumer("CG_RESTART", server, listener=second, **FAST)
    consumer.subscribe(topic)
    async with consumer:
        await second.wait_for(10)
        await asyncio.sleep(0.5)  # the behaviour under test: nothing consumed before comes again
    assert second.bodies() == sorted(b"second-%d" % i for i in range(10))


async def test_broadcasting_delivers_everything_to_every_consumer(
    server: str, producer: Producer, topic: str, tmp_path: Path
) -> None:
    await producer.fetch_publish_queues(topic)  # creates the topic before the consumers look
    collectors = [Collector(), Collector()]
    consumers = [
        PushConsumer(
            "CG_BROADCAST",
            server,
            listener=c,
            message_model=MessageModel.BROADCASTING,
            local_offset_dir=tmp_path,
            **FAST,
        )
        for c in collectors
    ]
    for c in consumers:
        c.subscribe(topic)
        await c.start()
    try:
        await producer.send(message(topic, b"warmup"))  # the topic exists once this returns
        await wait_until(
            lambda: all(len(c.held_queues()) == 4 for c in consumers), 20,
            "each broadcasting consumer to hold all four queues",
        )  # fmt: skip
        await asyncio.gather(*(producer.send(message(topic, b"b-%d" % i)) for i in range(20)))
        for col in collectors:
            await col.wait_for(20)
    finally:
        for c in consumers:
            await c.shutdown()
    for col in collectors:
        assert {b"b-%d" % i for i in range(20)} <= set(col.bodies())
    # Broadcasting keeps offsets locally, one file per client.
    assert len(list(tmp_path.rglob("offsets.json"))) == 2


async def test_two_consumers_split_the_queues_and_rebalance_when_one_leaves(
    server: str, producer: Producer, topic: str
) -> None:
    await producer.send(message(topic, b"create"))
    got: dict[int, Collector] = {0: Collector(), 1: Collector()}
    consumers = [
        PushConsumer(
            "CG_SPLIT",
            server,
            listener=got[i],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            **FAST,
        )
        for i in range(2)
    ]
    for c in consumers:
        c.subscribe(topic)
        await c.start()
    c0, c1 = consumers
    try:

        def topic_queues(c: PushConsumer) -> set[MessageQueue]:
            return {mq for mq in c.held_queues() if mq.topic == topic}

        await wait_until(
            lambda: len(topic_queues(c0)) == 2 and len(topic_queues(c1)) == 2, 20,
            "the two consumers to hold two queues each",
        )  # fmt: skip
        assert not topic_queues(c0) & topic_queues(c1)
        await asyncio.gather(*(producer.send(message(topic, b"m-%d" % i)) for i in range(40)))
        await wait_until(
            lambda: len(got[0].got) + len(got[1].got) >= 41, 20, "41 messages consumed"
        )
        assert got[0].got and got[1].got  # both took part
        await c1.shutdown()
        await wait_until(
            lambda: len(topic_queues(c0)) == 4, 20, "the remaining consumer to take all queues"
        )
        await asyncio.gather(*(producer.send(message(topic, b"n-%d" % i)) for i in range(20)))
        await wait_until(
            lambda: sum(m.body.startswith(b"n-") for m in got[0].got) >= 20, 20,
            "the remaining consumer to consume the 20 later messages",
        )  # fmt: skip
    finally:
        for c in consumers:
            await c.shutdown()
    everything = got[0].bodies() + got[1].bodies()
    expected = {b"create"} | {b"m-%d" % i for i in range(40)} | {b"n-%d" % i for i in range(20)}
    assert set(everything) == expected


async def test_a_failed_message_comes_back_through_the_retry_topic(
    server: str, producer: Producer, topic: str
) -> None:
    seen: list[MessageExt] = []
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        seen.extend(m for m in msgs if m.body == b"fragile")
        if not seen:
            return ConsumeResult.CONSUME_SUCCESS
        if len(seen) == 1:
            raise RuntimeError("the first delivery fails")
        done.set()
        return ConsumeResult.CONSUME_SUCCESS

    await producer.send(message(topic, b"create"))
    consumer = PushConsumer("CG_RETRY", server, listener=listener, **FAST)
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(
            lambda: any(mq.topic == topic for mq in consumer.held_queues()), 20,
            "the consumer to hold a queue of the topic",
        )  # fmt: skip
        sent = await producer.send(message(topic, b"fragile", tags="T", keys="K1"))
        async with asyncio.timeout(20):
            await done.wait()
    first, again = seen[0], seen[1]
    assert first.body == again.body == b"fragile"
    assert again.topic == topic  # the retry topic is hidden from the listener
    assert again.reconsume_times == 1
    assert again.msg_id == sent.msg_id and again.keys == "K1"


async def test_lite_pull_consumer_polls_commits_and_seeks(
    server: str, producer: Producer, topic: str
) -> None:
    await producer.send_batch([message(topic, b"p-%d" % i) for i in range(8)])
    consumer = LitePullConsumer(
        "CG_LITE", server, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False, **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    async with consumer:
        polled: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(polled) < 8:
                polled += await consumer.poll(1)
        assert sorted(m.body for m in polled) == sorted(b"p-%d" % i for i in range(8))
        mq = next(
            mq
            for mq in consumer.held_queues()
            if mq.topic == topic and mq.queue_id == polled[0].queue_id
        )
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 8
        await consumer.seek(mq, 3)
        again: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(again) < 5:
                again += await consumer.poll(1)
        assert [m.queue_offset for m in again] == [3, 4, 5, 6, 7]

    assigned = LitePullConsumer("CG_ASSIGN", server, **FAST)
    queues = await assigned.fetch_message_queues(topic)
    assigned.assign([mq])
    async with assigned:
        await assigned.seek(mq, 6)
        tail: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(tail) < 2:
                tail += await assigned.poll(1)
        assert [m.body for m in tail] == [b"p-6", b"p-7"]
        assert assigned.held_queues() == [mq] and mq in queues


def test_blocking_facade(server: str, topic: str) -> None:
    received: list[bytes] = []
    with BlockingProducer("PG_BLOCKING", server) as producer:
        results = [producer.send(message(topic, b"x-%d" % i)) for i in range(5)]
        assert all(r.status is SendStatus.SEND_OK for r in results)
        future = producer.send_async(message(topic, b"x-5"))
        assert future.result(10).status is SendStatus.SEND_OK
        producer.send_oneway(message(topic, b"x-6"))
        producer.send_batch([message(topic, b"x-7"), message(topic, b"x-8")])

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        received.extend(m.body for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        "CG_BLOCKING", server, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST,
    )  # fmt: skip
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    with consumer:
        wait_until_sync(lambda: len(received) >= 9, 20, "nine messages received")
    assert sorted(received) == sorted(b"x-%d" % i for i in range(9))

    lite = BlockingLitePullConsumer(
        "CG_BLOCKING_LITE", server, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST,
    )  # fmt: skip
    lite.subscribe(topic)
    with lite:
        polled: list[MessageExt] = []
        for _ in range(40):
            polled += lite.poll(0.5)
            if len(polled) >= 9:
                break
        assert sorted(m.body for m in polled) == sorted(received)


async def test_bad_input_gets_clear_errors(server: str, producer: Producer) -> None:
    with pytest.raises(ClientError, match="illegal characters"):
        await producer.send(message("bad topic!", b"x"))
    with pytest.raises(ClientError, match="body length is zero"):
        await producer.send(message("GoodTopic", b""))
    with pytest.raises(ClientError, match="same"):
        await producer.send_batch([message("A1", b"x"), message("B1", b"y")])
    with pytest.raises(ClientError, match="no subscription"):
        await PushConsumer("CG_NONE", server, listener=Collector()).start()
