"""Which delivery time a timer message asks for, and how the send path parks it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pocketmq.broker.timer import TimerMessageService, deliver_time_ms
from pocketmq.errors import RequestError
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.names import TIMER_TOPIC
from pocketmq.store import MessageStore
from pocketmq.store.config import StoreConfig
from pocketmq.store.dispatch import compute_tags_code


def msg(**props: str) -> MessageExt:
    return MessageExt("T", b"x", queue_id=3, properties=dict(props))


def test_each_timer_property() -> None:
    now = 1_000_000
    assert deliver_time_ms(msg(TIMER_DELIVER_MS="1234567"), now) == 1234567
    assert deliver_time_ms(msg(TIMER_DELAY_SEC="5"), now) == now + 5000
    assert deliver_time_ms(msg(TIMER_DELAY_MS="250"), now) == now + 250
    assert deliver_time_ms(msg(__STARTDELIVERTIME="2000000"), now) == 2000000
    assert deliver_time_ms(msg(), now) is None
    with pytest.raises(RequestError, match="not a number"):
        deliver_time_ms(msg(TIMER_DELAY_MS="soon"), now)


@pytest.fixture
def service(tmp_path: Path) -> TimerMessageService:
    store = MessageStore(StoreConfig(store_path_root_dir=tmp_path))
    return TimerMessageService(store, tmp_path / "timercheck.json", max_delay_s=60)


def test_rewrite_parks_future_timers_and_passes_due_ones(service: TimerMessageService) -> None:
    m = msg(TIMER_DELAY_SEC="10", DELAY="3", TAGS="A")
    service.rewrite(m)
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "3"
    due = int(m.properties["TIMER_OUT_MS"])
    assert abs(due - (time.time() * 1000 + 10_000)) < 1000
    assert "TIMER_DELAY_SEC" not in m.properties and "DELAY" not in m.properties
    # The store writes the delivery time in the consume-queue tag field.
    assert compute_tags_code(m.topic, m.properties, 0, (1000,)) == due

    past = msg(TIMER_DELIVER_MS=str(int(time.time() * 1000) - 1))
    service.rewrite(past)
    assert past.topic == "T" and "TIMER_DELIVER_MS" not in past.properties

    with pytest.raises(RequestError, match="timerMaxDelaySec"):
        service.rewrite(msg(TIMER_DELAY_SEC="61"))
