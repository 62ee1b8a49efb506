"""Timer messages: any delivery time (RocketMQ 5's TimerMessageStore, in our own layout).

A message with TIMER_DELIVER_MS (absolute), TIMER_DELAY_SEC / TIMER_DELAY_MS (relative) or
``__STARTDELIVERTIME`` (absolute, the seed's property) is stored in ``rmq_sys_wheel_timer``
queue 0 with its real topic and queue in properties and its delivery time in TIMER_OUT_MS;
the store writes that time in the consume-queue unit's tag field. The body stays in the
CommitLog: the wheel holds only consume-queue offsets, 8 bytes per pending timer, in one-second
buckets keyed by delivery second, and a heap of bucket keys.

Delivery goes in (delivery time, queue offset) order, so one watermark says what has been
delivered. ``timercheck.json`` saves it with the lowest offset still pending; a restart scans
the timer queue from there, re-buckets what is past the watermark and, as after a crash, skips
timers whose message already reached the real topic (found by UNIQ_KEY), so none is lost or
delivered twice. The bucket due now is loaded from the consume queue, sorted, and each message
re-put at its exact time. Time is read from the injected clock; ``deliver_due`` is the one step
that re-puts, so a test drives the wheel by advancing a fake clock and calling it.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import logging
from array import array
from pathlib import Path

from pocketmq.broker.schedule import RETRY_AFTER_FAILURE_MS, already_delivered, time_up
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import PocketMQError, RequestError
from pocketmq.jsonfile import read_json, write_json_atomic, write_json_atomic_off_loop
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import TIMER_PROPERTIES, MessageConst, MessageExt
from pocketmq.protocol.names import TIMER_TOPIC
from pocketmq.store import MessageStore
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.tasks import cancel_and_wait, run_when_due

log = logging.getLogger(__name__)

BUCKET_MS = 1000


def deliver_time_ms(msg: MessageExt, now_ms: int) -> int | None:
    """The delivery time a message asks for, None if it asks for none.

    Raises:
        RequestError: a timer property that is not a number.
    """
    props = msg.properties
    try:
        if MessageConst.TIMER_DELIVER_MS in props:
            return int(props[MessageConst.TIMER_DELIVER_MS])
        if MessageConst.TIMER_DELAY_SEC in props:
            return now_ms + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000
        if MessageConst.TIMER_DELAY_MS in props:
            return now_ms + int(props[MessageConst.TIMER_DELAY_MS])
        if MessageConst.START_DELIVER_TIME in props:
            return int(props[MessageConst.START_DELIVER_TIME])
    except ValueError as exc:
        raise RequestError(
            ResponseCode.MESSAGE_ILLEGAL, f"timer message property is not a number: {exc}"
        ) from exc
    return None


class TimerMessageService:
    def __init__(
        self, store: MessageStore, path: Path, max_delay_s: int, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        self.path = path
        self.clock = clock
        self.max_delay_ms = max_delay_s * 1000
        self.buckets: dict[int, array[int]] = {}
        self._heap: list[int] = []  # bucket keys, each pushed once when created
        self.pending = 0
        # Everything at or before (time, offset) has been delivered.
        self.watermark = (0, -1)
        self._enqueued_to = 0  # next timer-queue offset to put in a bucket
        self._current: list[tuple[int, int]] | None = None  # the bucket being delivered
        self._current_key = -1
        self._wake = asyncio.Event()
        self._resumed = False  # arrivals are bucketed once resume() has caught up
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ send side

    def rewrite(self, msg: MessageExt) -> None:
        """Park a timer message in the timer topic; one already due is left to go straight
        to its topic.

        Raises:
            RequestError: a bad timer property, or a delay beyond timerMaxDelaySec.
        """
        if msg.properties.keys().isdisjoint(TIMER_PROPERTIES):
            return  # the common case, on every send: no clock read
        now = self.clock.now_ms()
        due = deliver_time_ms(msg, now)
        if due is None:
            return
        if due - now > self.max_delay_ms:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timer message delay {due - now} ms exceeds timerMaxDelaySec "
                f"({self.max_delay_ms // 1000} s)",
            )
        for name in TIMER_PROPERTIES:
            msg.properties.pop(name, None)
        if due <= now:
            return
        msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)
        msg.properties[MessageConst.TIMER_OUT_MS] = str(due)
        msg.properties[MessageConst.REAL_TOPIC] = msg.topic
        msg.properties[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0

    def on_message_arrived(self, topic: str, queue_id: int, queue_offset: int) -> None:
        if topic == TIMER_TOPIC and self._resumed:
            self._enqueue_new()

    # ------------------------------------------------------------------ the wheel

    def _add(self, offset: int, due: int) -> None:
        current = self._current
        if current is not None and due // BUCKET_MS <= self._current_key:
            bisect.insort(current, (due, offset))  # due within the bucket being delivered
            self.pending += 1
            self._wake.set()
            return
        key = due // BUCKET_MS
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = array("q")
            heapq.heappush(self._heap, key)
            if self._heap[0] == key:
                self._wake.set()  # earlier than what the loop sleeps for
        bucket.append(offset)
        self.pending += 1

    def _enqueue_new(self) -> None:
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return
        for qo, _phy, _size, due in cq.iter_units(self._enqueued_to):
            if (due, qo) > self.watermark:
                self._add(qo, due)
            self._enqueued_to = qo + 1

    def _low_offset(self) -> int:
        lows = [min(b) for b in self.buckets.values() if b]
        if self._current:
            lows.append(min(off for _, off in self._current))
        return min(lows, default=self._enqueued_to)

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        """Raises: PocketMQError: the checkpoint is unreadable."""
        data = read_json(self.path)
        if not isinstance(data, dict):
            return
        try:
            self._enqueued_to = int(data.get("lowOffset", 0))
            self.watermark = (int(data["watermarkMs"]), int(data["watermarkOffset"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise PocketMQError(f"{self.path}: malformed timer checkpoint: {exc}") from exc

    def persist(self) -> None:
        write_json_atomic(self.path, self._checkpoint())

    async def persist_off_loop(self) -> None:
        """``persist``, the file written and synced on a worker thread (the periodic write)."""
        await write_json_atomic_off_loop(self.path, self._checkpoint())

    def _checkpoint(self) -> dict[str, int]:
        return {
            "lowOffset": self._low_offset(),
            "watermarkMs": self.watermark[0],
            "watermarkOffset": self.watermark[1],
        }

    # ------------------------------------------------------------------ delivery

    async def start(self) -> None:
        self.resume()
        self._tasks = [asyncio.create_task(run_when_due(self.deliver_due, self._wake))]

    def resume(self) -> None:
        """Bucket the timers pending since the checkpoint, skip those delivered after it, and
        bucket every later arrival."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is not None and self._enqueued_to < cq.min_offset_in_queue():
            self._enqueued_to = cq.min_offset_in_queue()
        self._enqueue_new()
        self._skip_delivered()
        self._resumed = True

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        self._resumed = False
        self.persist()

    def _skip_delivered(self) -> None:
        """After a crash: timers due already whose message is in its real topic were delivered
        after the last checkpoint; move the watermark past them."""
        now = self.clock.now_ms()
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        while cq is not None and self._heap and self._heap[0] * BUCKET_MS <= now:
            key = self._heap[0]
            entries = sorted((self._due(cq, off), off) for off in self.buckets[key])
            for due, off in entries:
                unit = cq.unit(off)
                msg = self.store.look_message_by_offset(unit[0]) if unit else None
                if msg is None or due > now or not already_delivered(self.store, msg, now):
                    return
                self.watermark = (due, off)
                self.buckets[key].remove(off)
                self.pending -= 1
            heapq.heappop(self._heap)
            del self.buckets[key]

    @staticmethod
    def _due(cq: ConsumeQueue, off: int) -> int:
        unit = cq.unit(off)
        return unit[2] if unit else 0

    async def deliver_due(self) -> int | None:
        """Re-put every timer due by now, in (delivery time, offset) order; returns ms until the
        next one is due (None: nothing pending)."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return None
        while True:
            current = self._current
            if not current:
                # The bucket is done: the next one, once its second has begun.
                self._current = None
                if not self._heap:
                    return None
                key = self._heap[0]
                now = self.clock.now_ms()
                if key * BUCKET_MS > now:
                    return key * BUCKET_MS - now
                heapq.heappop(self._heap)
                offsets = self.buckets.pop(key)
                self._current_key = key
                self._current = sorted((self._due(cq, off), off) for off in offsets)
                continue
            due, off = current[0]
            now = self.clock.now_ms()
            if due > now:
                return due - now
            unit = cq.unit(off)
            msg = self.store.look_message_by_offset(unit[0]) if unit else None
            again = None if msg is None else time_up(msg)
            if msg is None:
                log.error("timer queue offset %d: no message, skipped", off)
            elif again is not None:
                result = await self.store.put_message(again)
                if not result.ok:
                    log.error(
                        "timer re-put of %s failed (%s), retrying in %.0f s",
                        msg.msg_id, result.status.name, RETRY_AFTER_FAILURE_MS / 1000,
                    )  # fmt: skip
                    return RETRY_AFTER_FAILURE_MS
            # Not pop(0): a late arrival due earlier may have been inserted during the put.
            current.remove((due, off))
            self.pending -= 1
            self.watermark = (due, off)
