"""The messaging service on a real store, without a network: the retry/DLQ rule and its one
implementation, sends to retry topics, and the long-poll loop released by a closed
connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from broker_parts import messaging_for, messaging_with_topic

from pocketmq.broker.consuming import PullQuery
from pocketmq.broker.messaging import MessagingService, retries_spent
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.stats import Protocol
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.pending import Pending, outcome_of
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import SCHEDULE_TOPIC, dlq_topic, retry_topic
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import GetStatus, MessageStore, PutResult

TOPIC = "OrderTopic"
GROUP = "GID_ORDERS"


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MessagingService]:
    service = messaging_with_topic(tmp_path, TOPIC, 2, FakeClock())
    service.store.on_message_arrived = service.broker.pull_hold.notify
    yield service
    service.store.close()


async def _origin(service: MessagingService, reconsume_times: int = 0) -> MessageExt:
    msg = MessageExt(
        topic=TOPIC,
        body=b"order-1",
        properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "ID1", MessageConst.TAGS: "A"},
        store_host=service.store_host,
        reconsume_times=reconsume_times,
    )
    result = await service.send(msg)
    assert result.ok
    origin = service.store.look_message_by_offset(result.phy_offsets[0])
    assert origin is not None
    return origin


def _last(service: MessagingService, topic: str, queue_id: int) -> MessageExt:
    offset = service.max_offset(topic, queue_id) - 1
    result = service.store.get_message(topic, queue_id, offset, 1)
    assert result.status is GetStatus.FOUND
    return decode_message(result.messages[0])


@pytest.mark.parametrize(
    ("reconsume_times", "max_times", "spent"),
    [(0, 16, False), (15, 16, False), (16, 16, True), (17, 16, True), (0, 0, True), (0, -1, True)],
)
def test_retries_spent(reconsume_times: int, max_times: int, spent: bool) -> None:
    assert retries_spent(reconsume_times, max_times) is spent


async def batch_sent(service: MessagingService, msgs: list[MessageExt]) -> PutResult:
    """``send_batch``'s result, now or when given."""
    result = service.send_batch(msgs)
    return result if isinstance(result, PutResult) else await outcome_of(result)


async def test_send_back_parks_the_retry_at_its_delay_level(service: MessagingService) -> None:
    origin = await _origin(service, reconsume_times=2)
    result = await service.send_back(GROUP, origin.phy_offset, 0, None)
    assert result is not None and result.ok
    # Level 3 + 2 earlier retries, parked in the delay queue of that level.
    parked = _last(service, SCHEDULE_TOPIC, 4)
    assert parked.properties[MessageConst.REAL_TOPIC] == retry_topic(GROUP)
    assert parked.properties[MessageConst.DELAY_TIME_LEVEL] == "5"
    assert parked.properties[MessageConst.RETRY_TOPIC] == TOPIC
    assert parked.properties[MessageConst.ORIGIN_MESSAGE_ID] == "ID1"
    assert parked.reconsume_times == 3
    assert parked.body == b"order-1"


async def test_send_back_past_the_maximum_goes_to_the_dlq(service: MessagingService) -> None:
    origin = await _origin(service, reconsume_times=16)
    assert await service.send_back(GROUP, origin.phy_offset, 0, None) is not None
    dead = _last(service, dlq_topic(GROUP), 0)
    assert dead.reconsume_times == 17
    assert MessageConst.DELAY_TIME_LEVEL not in dead.properties
    assert dead.properties[MessageConst.RETRY_TOPIC] == TOPIC
    # A negative level asks for the DLQ at once, whatever the count.
    fresh = await _origin(service)
    assert await service.send_back(GROUP, fresh.phy_offset, -1, None) is not None
    assert _last(service, dlq_topic(GROUP), 0).reconsume_times == 1


async def test_redeliver_keeps_the_first_topic_and_id(service: MessagingService) -> None:
    origin = await _origin(service)
    retry = f"%RETRY%{GROUP}_{TOPIC}"
    await service.redeliver(GROUP, origin, original_topic=TOPIC, reconsume_times=1,
                            retry_to=retry)  # fmt: skip
    again = _last(service, retry, 0)
    await service.redeliver(GROUP, again, original_topic=retry, reconsume_times=2, retry_to=None)
    dead = _last(service, dlq_topic(GROUP), 0)
    assert (again.reconsume_times, dead.reconsume_times) == (1, 2)
    for msg in (again, dead):
        assert msg.properties[MessageConst.RETRY_TOPIC] == TOPIC
        assert msg.properties[MessageConst.ORIGIN_MESSAGE_ID] == "ID1"


async def test_a_send_to_a_retry_topic_past_the_maximum_is_dead_lettered(
    service: MessagingService,
) -> None:
    service.topic_for_send(retry_topic(GROUP))
    msg = MessageExt(topic=retry_topic(GROUP), body=b"x", reconsume_times=17,
                     store_host=service.store_host)  # fmt: skip
    assert (await service.send(msg, max_reconsume_times=16)).ok
    assert _last(service, dlq_topic(GROUP), 0).body == b"x"
    ok = MessageExt(topic=retry_topic(GROUP), body=b"y", reconsume_times=16,
                    store_host=service.store_host)  # fmt: skip
    assert (await service.send(ok, max_reconsume_times=16)).ok
    assert service.max_offset(dlq_topic(GROUP), 0) == 1


async def test_a_held_pull_is_released_when_its_connection_closes(
    service: MessagingService,
) -> None:
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    query = PullQuery(GROUP, TOPIC, 0, 0, 32)
    pull = asyncio.create_task(service.pull(query, hold_ms=30_000, closed=closed))
    await asyncio.sleep(0)  # let it park
    assert not pull.done()
    closed.set_result(None)
    result = await asyncio.wait_for(pull, 5)  # a guard against a hang, not a timing check
    assert result.status is not GetStatus.FOUND
    # A held pull is woken by an arrival, too.
    waiting = asyncio.create_task(service.pull(query, hold_ms=30_000))
    await asyncio.sleep(0)
    await _origin(service)
    found = await asyncio.wait_for(waiting, 5)
    assert found.status is GetStatus.FOUND
    assert decode_message(found.messages[0]).body == b"order-1"


async def test_a_send_that_wakes_a_held_pull_lets_it_answer_first(
    service: MessagingService,
) -> None:
    done: list[str] = []
    pull = asyncio.create_task(service.pull(PullQuery(GROUP, TOPIC, 0, 0, 32), hold_ms=30_000))
    pull.add_done_callback(lambda _: done.append("pull"))
    await asyncio.sleep(0)  # let it park
    msg = MessageExt(topic=TOPIC, queue_id=0, body=b"x", store_host=service.store_host)
    send = asyncio.create_task(service.send(msg))
    send.add_done_callback(lambda _: done.append("send"))
    await asyncio.wait_for(asyncio.gather(pull, send), 5)  # a guard against a hang
    assert done == ["pull", "send"]
    assert pull.result().status is GetStatus.FOUND
    # With nobody parked, a send takes no extra turn of the loop: done within the first.
    alone = asyncio.create_task(service.send(msg))
    await asyncio.sleep(0)
    assert alone.done() and alone.result().ok


async def test_every_stored_message_carries_the_brokers_cluster_region_and_trace_switch(
    service: MessagingService,
) -> None:
    # A producer's CLUSTER (a reply copies its request's) is replaced by this broker's.
    def msg(body: bytes, queue_id: int) -> MessageExt:
        return MessageExt(topic=TOPIC, body=body, queue_id=queue_id,
                          properties={MessageConst.CLUSTER: "X"})  # fmt: skip

    assert (await service.send(msg(b"one", 0))).ok
    assert (await batch_sent(service, [msg(b"b0", 1), msg(b"b1", 1)])).ok
    stored = [
        decode_message(raw)
        for queue_id in (0, 1)
        for raw in service.store.get_message(TOPIC, queue_id, 0, 32).messages
    ]
    assert [m.body for m in stored] == [b"one", b"b0", b"b1"]
    for m in stored:
        assert m.properties[MessageConst.CLUSTER] == "DefaultCluster"
        assert m.properties[MessageConst.MSG_REGION] == "DefaultRegion"
        assert m.properties[MessageConst.TRACE_SWITCH] == "true"


async def test_reset_offsets_by_time_never_forward_unless_forced(
    tmp_path: Path, store: MessageStore, clock: FakeClock
) -> None:
    topics = TopicConfigManager(
        tmp_path / "t.json", cluster="C", broker_name="b", auto_create=True, default_queue_nums=2
    )
    topics.load()
    topics.create_system_if_absent(TOPIC, 2, 6)
    service = messaging_for(tmp_path, store, topics, ConsumerOffsetManager(tmp_path / "o.json"))
    for i in range(4):  # queue 0: stored at t, t+1s, t+2s, t+3s
        assert (await service.send(MessageExt(topic=TOPIC, body=b"m%d" % i, queue_id=0))).ok
        clock.advance(1000)
    start = clock.now_ms() - 4000
    with pytest.raises(RequestError) as err:  # no offset of the group yet
        service.reset_offsets(GROUP, TOPIC, start, force=False)
    assert err.value.code == ResponseCode.SYSTEM_ERROR and "not exist" in err.value.remark
    service.commit_offset(GROUP, TOPIC, 0, 3)
    service.commit_offset(GROUP, TOPIC, 1, 0)
    # Back to the message stored at start + 1 s; queue 1 (empty) stays at 0.
    assert service.reset_offsets(GROUP, TOPIC, start + 1000, force=False) == {0: 1, 1: 0}
    assert service.reset_offsets(GROUP, TOPIC, start + 3500, force=False) == {0: 3, 1: 0}
    assert service.reset_offsets(GROUP, TOPIC, start + 3500, force=True) == {0: 4, 1: 0}
    assert service.reset_offsets(GROUP, TOPIC, -1, force=True) == {0: 4, 1: 0}
    assert service.committed_offset(GROUP, TOPIC, 0) == 3  # nothing is committed here
    with pytest.raises(RequestError) as err:
        service.reset_offsets(GROUP, "Nope", start, force=False)
    # Broker2Client.resetOffset answers SYSTEM_ERROR for a topic the broker does not have.
    assert err.value.code == ResponseCode.SYSTEM_ERROR


async def test_statistics_count_each_send_pull_and_send_back_once(
    service: MessagingService,
) -> None:
    stats = service.stats
    origin = await _origin(service)
    batch = [MessageExt(topic=TOPIC, body=b"b", queue_id=0, store_host=service.store_host)
             for _ in range(3)]  # fmt: skip
    await batch_sent(service, batch)
    put = stats.item("TOPIC_PUT_NUMS", TOPIC)
    assert put is not None and (put.value, put.times) == (4, 2)  # one count per put
    result = await service.pull(PullQuery(GROUP, TOPIC, 0, 0, 32), hold_ms=0,
                                protocol=Protocol.GRPC)  # fmt: skip
    got = stats.item("GROUP_GET_NUMS", f"{TOPIC}@{GROUP}")
    size = stats.item("GROUP_GET_SIZE", f"{TOPIC}@{GROUP}")
    assert got is not None and size is not None
    assert (got.value, got.times, got.by_protocol) == (
        len(result.messages),
        1,
        [0, len(result.messages)],
    )
    assert size.value == result.buffer_total_size
    await service.pull(PullQuery(GROUP, TOPIC, 0, 99, 32), hold_ms=0)  # nothing there
    assert stats.get_miss_times == 1
    assert await service.send_back(GROUP, origin.phy_offset, 0, None) is not None
    back = stats.item("SNDBCK_PUT_NUMS", f"{TOPIC}@{GROUP}")
    assert back is not None and back.value == 1
    # The retry copy counts in the store's totals, not in any topic's puts.
    assert stats.put_total == 5
    assert stats.item("TOPIC_PUT_NUMS", retry_topic(GROUP)) is None


def _plain(body: bytes, queue_id: int = 0, **props: str) -> MessageExt:
    return MessageExt(topic=TOPIC, body=body, queue_id=queue_id, properties=dict(props))


async def test_a_run_of_sends_is_one_append_each_with_its_answer_and_count(
    service: MessagingService,
) -> None:
    fifo = {MessageConst.SHARDING_KEY: "k"}
    run = [_plain(b"1"), _plain(b"2", 1), _plain(b"3", **fifo), _plain(b"4")]
    appends: list[int] = []
    put = service.store.commitlog.put

    def counted(msgs: list[MessageExt]) -> object:
        appends.append(len(msgs))
        return put(msgs)

    service.store.commitlog.put = counted  # type: ignore[method-assign,assignment]
    outcomes = service.send_run(run)
    assert appends == [4]
    assert all(isinstance(o, PutResult) and o.ok for o in outcomes)
    results = [o for o in outcomes if isinstance(o, PutResult)]
    assert [r.queue_offset for r in results] == [0, 0, 1, 2]
    offsets = [r.phy_offsets[0] for r in results]
    assert offsets == sorted(offsets)  # appended in the run's order
    assert [_last(service, TOPIC, 0).body, _last(service, TOPIC, 1).body] == [b"4", b"2"]
    # Every message stamped as a single send is.
    assert _last(service, TOPIC, 0).properties[MessageConst.CLUSTER]
    # One count a put, each under its message type, with one call per type.
    put_nums = service.stats.item("TOPIC_PUT_NUMS", TOPIC)
    assert put_nums is not None and (put_nums.value, put_nums.times) == (4, 4)
    assert put_nums.by_labels == {(Protocol.REMOTING, "NORMAL"): 3, (Protocol.REMOTING, "FIFO"): 1}


async def test_a_run_that_wakes_a_held_pull_lets_it_answer_first(
    service: MessagingService,
) -> None:
    pull = asyncio.create_task(service.pull(PullQuery(GROUP, TOPIC, 0, 0, 32), hold_ms=30_000))
    await asyncio.sleep(0)  # let it park
    answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[tuple[bool, bool]] = []  # (the answer's put ok, the pull already answered)

    def answer(outcome: PutResult | Exception) -> None:
        seen.append((isinstance(outcome, PutResult) and outcome.ok, pull.done()))
        if len(seen) == 2:
            answered.set_result(None)

    for outcome in service.send_run([_plain(b"a"), _plain(b"b")]):
        assert isinstance(outcome, Pending)  # not at once: the pull it woke goes first
        outcome.then = answer
    await asyncio.wait_for(answered, 5)  # a guard against a hang
    assert seen == [(True, True), (True, True)]
    assert pull.result().status is GetStatus.FOUND
    # With nobody parked, a run's answers are there at once.
    assert all(isinstance(o, PutResult) for o in service.send_run([_plain(b"c"), _plain(b"d")]))


async def test_a_run_the_store_refuses_is_answered_for_each_send(
    service: MessagingService,
) -> None:
    service.store.disk_full = True
    outcomes = service.send_run([_plain(b"a"), _plain(b"b")])
    assert [o.status.name for o in outcomes if isinstance(o, PutResult)] == [
        "SERVICE_NOT_AVAILABLE", "SERVICE_NOT_AVAILABLE",
    ]  # fmt: skip
    assert service.stats.item("TOPIC_PUT_NUMS", TOPIC) is None  # nothing stored, nothing counted


async def test_a_deferred_answer_that_fails_leaves_the_runs_others_answered(
    service: MessagingService, caplog: pytest.LogCaptureFixture
) -> None:
    pull = asyncio.create_task(service.pull(PullQuery(GROUP, TOPIC, 0, 0, 32), hold_ms=30_000))
    await asyncio.sleep(0)  # let it park: the run's answers are deferred past it
    answered: asyncio.Future[PutResult | Exception] = asyncio.get_running_loop().create_future()

    def fails(outcome: PutResult | Exception) -> None:
        raise RuntimeError("this answer fails")

    first, second = service.send_run([_plain(b"a"), _plain(b"b")])
    assert isinstance(first, Pending) and isinstance(second, Pending)
    first.then = fails
    second.then = answered.set_result
    outcome = await asyncio.wait_for(answered, 5)  # a guard against a hang
    assert isinstance(outcome, PutResult) and outcome.ok
    assert "answering a send failed" in caplog.text
    await pull
