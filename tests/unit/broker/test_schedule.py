"""Delay levels on a fake clock: a message is re-put into its real topic when its level's delay
has passed since it was stored, not a millisecond earlier, with its properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore


@pytest.fixture
def schedule(store: MessageStore, tmp_path: Path, clock: FakeClock) -> ScheduleMessageService:
    service = ScheduleMessageService(store, tmp_path / "delayOffset.json", clock=clock)
    store.on_message_arrived = service.on_message_arrived
    return service


async def send_delayed(
    store: MessageStore, schedule: ScheduleMessageService, body: bytes, level: int
) -> None:
    msg = MessageExt(
        "RealTopic", body, queue_id=2,
        properties={
            MessageConst.DELAY_TIME_LEVEL: str(level), MessageConst.TAGS: "TagA",
            MessageConst.KEYS: "k1", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: body.decode(),
            "userProp": "v",
        },
    )  # fmt: skip
    schedule.rewrite(msg)
    assert (msg.topic, msg.queue_id) == (SCHEDULE_TOPIC, level - 1)
    assert (await store.put_message(msg)).ok


def real_topic(store: MessageStore) -> list[MessageExt]:
    got = store.get_message("RealTopic", 2, 0, 32)
    return [decode_message(raw) for raw in got.messages]


async def test_a_level_3_message_is_due_10_seconds_after_it_was_stored(
    store: MessageStore, schedule: ScheduleMessageService, clock: FakeClock
) -> None:
    assert schedule.levels_ms[2] == 10_000
    stored_at = clock.now_ms()
    await send_delayed(store, schedule, b"late", 3)
    assert await schedule.deliver_due(3) == 10_000
    clock.advance(9_999)
    assert await schedule.deliver_due(3) == 1
    assert real_topic(store) == []

    clock.advance(1)
    assert await schedule.deliver_due(3) is None  # the level is empty again
    [due] = real_topic(store)
    assert due.body == b"late" and due.store_timestamp == stored_at + 10_000
    assert (due.tags, due.keys, due.uniq_key) == ("TagA", "k1", "late")
    assert due.properties["userProp"] == "v"
    assert MessageConst.DELAY_TIME_LEVEL not in due.properties
    assert schedule.offsets == {3: 1}
    assert await schedule.deliver_due(3) is None
    assert len(real_topic(store)) == 1  # delivered once


async def test_each_level_keeps_its_own_time_and_order(
    store: MessageStore, schedule: ScheduleMessageService, clock: FakeClock
) -> None:
    await send_delayed(store, schedule, b"a", 3)
    clock.advance(2_000)
    await send_delayed(store, schedule, b"b", 3)
    await send_delayed(store, schedule, b"one-second", 1)
    clock.advance(1_000)
    assert await schedule.deliver_due(1) is None
    assert [m.body for m in real_topic(store)] == [b"one-second"]

    clock.advance(7_000)  # 10 s after a, 8 s after b
    assert await schedule.deliver_due(3) == 2_000
    assert [m.body for m in real_topic(store)] == [b"one-second", b"a"]
    clock.advance(2_000)
    assert await schedule.deliver_due(3) is None
    assert [m.body for m in real_topic(store)] == [b"one-second", b"a", b"b"]
    assert await schedule.deliver_due(2) is None  # nothing was ever sent there


async def test_a_delivery_time_beyond_the_level_is_due_at_once(
    store: MessageStore, tmp_path: Path, clock: FakeClock
) -> None:
    # The record was stamped an hour ahead of the service's clock (the clock stepped back
    # since): no level holds a message for longer than its delay from now.
    behind = FakeClock(clock.now_ms() - 3_600_000)
    schedule = ScheduleMessageService(store, tmp_path / "delayOffset.json", clock=behind)
    await send_delayed(store, schedule, b"from the future", 3)
    assert await schedule.deliver_due(3) is None
    assert [m.body for m in real_topic(store)] == [b"from the future"]
