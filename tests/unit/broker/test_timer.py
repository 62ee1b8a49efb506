"""Timer messages on a fake clock: each one is re-put into its real topic at its own
millisecond, across the one-second buckets of the wheel, and one already due is not parked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.broker.timer import TimerMessageService
from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import TIMER_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore


@pytest.fixture
def timer(store: MessageStore, tmp_path: Path, clock: FakeClock) -> TimerMessageService:
    service = TimerMessageService(store, tmp_path / "timercheck.json", 3600, clock=clock)
    store.on_message_arrived = service.on_message_arrived
    service.resume()
    return service


async def send_at(store: MessageStore, timer: TimerMessageService, body: str, at_ms: int) -> str:
    """Send ``body`` for delivery at ``at_ms``; returns the topic it was stored in."""
    msg = MessageExt(
        "RealTopic", body.encode(), queue_id=1,
        properties={MessageConst.TIMER_DELIVER_MS: str(at_ms), MessageConst.TAGS: "TagT",
                    MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: body, "userProp": body},
    )  # fmt: skip
    timer.rewrite(msg)
    assert (await store.put_message(msg)).ok
    return msg.topic


def delivered(store: MessageStore) -> list[str]:
    got = store.get_message("RealTopic", 1, 0, 64)
    return [decode_message(raw).body.decode() for raw in got.messages]


async def test_a_timer_in_the_past_or_now_is_not_parked(
    store: MessageStore, timer: TimerMessageService, clock: FakeClock
) -> None:
    assert await send_at(store, timer, "past", clock.now_ms() - 1) == "RealTopic"
    assert await send_at(store, timer, "now", clock.now_ms()) == "RealTopic"
    assert await send_at(store, timer, "soon", clock.now_ms() + 1) == TIMER_TOPIC
    assert delivered(store) == ["past", "now"]
    assert timer.pending == 1


async def test_a_future_timer_is_delivered_at_its_millisecond_with_its_properties(
    store: MessageStore, timer: TimerMessageService, clock: FakeClock
) -> None:
    start = clock.now_ms()  # on a second
    assert await send_at(store, timer, "t", start + 1_500) == TIMER_TOPIC
    assert await timer.deliver_due() == 1_000  # its bucket, the next second, has not begun
    clock.advance(1_000)
    assert await timer.deliver_due() == 500
    clock.advance(499)
    assert await timer.deliver_due() == 1
    assert delivered(store) == []
    clock.advance(1)
    assert await timer.deliver_due() is None
    assert delivered(store) == ["t"]
    [msg] = store.get_message("RealTopic", 1, 0, 1).messages
    due = decode_message(msg)
    assert due.store_timestamp == start + 1_500
    assert (due.tags, due.uniq_key, due.properties["userProp"]) == ("TagT", "t", "t")
    assert MessageConst.TIMER_DELIVER_MS not in due.properties
    assert (timer.pending, timer.watermark[0]) == (0, start + 1_500)


async def test_bucket_boundaries(
    store: MessageStore, timer: TimerMessageService, clock: FakeClock
) -> None:
    second = clock.now_ms() + 1_000  # the start of the next bucket
    for body, at in (("next-bucket", second + 1_000), ("last-ms", second + 999),
                     ("first-ms", second)):  # fmt: skip
        await send_at(store, timer, body, at)
    clock.advance(999)
    assert await timer.deliver_due() == 1
    assert delivered(store) == []
    clock.advance(1)
    assert await timer.deliver_due() == 999
    assert delivered(store) == ["first-ms"]
    # A timer due within the bucket being delivered joins it, in time order.
    await send_at(store, timer, "joined", second + 500)
    assert await timer.deliver_due() == 500
    clock.advance(500)
    assert await timer.deliver_due() == 499
    clock.advance(499)
    assert await timer.deliver_due() == 1  # the next bucket starts in 1 ms
    assert delivered(store) == ["first-ms", "joined", "last-ms"]
    clock.advance(1)
    assert await timer.deliver_due() is None
    assert delivered(store) == ["first-ms", "joined", "last-ms", "next-bucket"]


async def test_timers_sent_out_of_order_go_in_time_order(
    store: MessageStore, timer: TimerMessageService, clock: FakeClock
) -> None:
    start = clock.now_ms()
    for i, delay_ms in enumerate((5_000, 1_200, 3_000, 1_100)):
        await send_at(store, timer, f"m{i}", start + delay_ms)
    clock.advance(10_000)
    assert await timer.deliver_due() is None
    assert delivered(store) == ["m3", "m1", "m2", "m0"]


async def test_a_restart_mid_bucket_delivers_the_rest_once(
    store: MessageStore, timer: TimerMessageService, clock: FakeClock, tmp_path: Path
) -> None:
    start = clock.now_ms()
    await send_at(store, timer, "early", start + 1_100)
    await send_at(store, timer, "late", start + 1_900)
    clock.advance(1_100)
    assert await timer.deliver_due() == 800
    timer.persist()  # what stop() saves

    again = TimerMessageService(store, tmp_path / "timercheck.json", 3600, clock=clock)
    again.load()
    store.on_message_arrived = again.on_message_arrived
    again.resume()
    assert again.pending == 1
    assert await again.deliver_due() == 800
    clock.advance(800)
    assert await again.deliver_due() is None
    assert delivered(store) == ["early", "late"]
