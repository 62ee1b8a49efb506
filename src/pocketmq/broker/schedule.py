"""Delay levels (ScheduleMessageService).

A message with the DELAY property is stored in ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``,
with its real topic and queue in REAL_TOPIC / REAL_QID; the store writes its delivery time in
place of the tag hash. Each level's queue is in delivery order (same delay, increasing store
time), so one task per level only ever looks at the head: it sleeps until the head is due, or
until a new message arrives in an empty level, and re-puts due messages into their real topic
with DELAY cleared. Nothing polls, so lateness is the event loop's, not a 100 ms tick's.
Due times are read from the injected clock; ``deliver_due`` is the one step that re-puts, so a
test drives a level by advancing a fake clock and calling it.

Progress per level goes to ``delayOffset.json`` when the broker calls ``persist`` (every
``flush_delay_offset_interval``) and on stop. After a crash the level restarts at the saved
offset; messages already re-put since then are recognised by their UNIQ_KEY in the real
topic (stored after the delayed copy) and skipped, so a restart neither loses nor duplicates
deliveries.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import PocketMQError
from pocketmq.jsonfile import PersistedJson, read_json
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, delay_level
from pocketmq.protocol.names import SCHEDULE_TOPIC
from pocketmq.store import MessageStore
from pocketmq.tasks import cancel_and_wait, run_when_due

log = logging.getLogger(__name__)

# A put that fails (disk full, store closing) is retried after this, from the same message.
RETRY_AFTER_FAILURE_MS = 10_000


def already_delivered(store: MessageStore, parked: MessageExt, now_ms: int) -> bool:
    """Whether a parked (delayed or timer) message was re-put already: its UNIQ_KEY is in its
    real topic, stored after the parked copy (and by ``now_ms``)."""
    uniq = parked.uniq_key
    real_topic = parked.properties.get(MessageConst.REAL_TOPIC)
    if not uniq or not real_topic:
        return False
    found = store.query_message(real_topic, uniq, 1, parked.store_timestamp, now_ms + 1)
    return bool(found.messages)


def time_up(parked: MessageExt) -> MessageExt | None:
    """The message to re-put when a parked one is due: back in its real topic and queue. None
    for a record that names no real topic (only the broker parks messages; such a record
    would be parked again at once, for ever)."""
    if not parked.properties.get(MessageConst.REAL_TOPIC):
        log.error("parked message %s in %s has no REAL_TOPIC, skipped", parked.msg_id,
                  parked.topic)  # fmt: skip
        return None
    props = dict(parked.properties)
    props.pop(MessageConst.DELAY_TIME_LEVEL, None)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return parked.put_again(
        props[MessageConst.REAL_TOPIC],
        int(props.get(MessageConst.REAL_QUEUE_ID, "0") or 0),
        props,
        parked.reconsume_times,
    )


class ScheduleMessageService(PersistedJson):
    def __init__(self, store: MessageStore, path: Path, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.path = path
        self.clock = clock
        self.levels_ms = store.config.delay_levels_ms
        self.offsets: dict[int, int] = {}
        self._wake = {level: asyncio.Event() for level in self.levels}
        self._tasks: list[asyncio.Task[None]] = []
        self._dirty = False

    @property
    def levels(self) -> range:
        return range(1, len(self.levels_ms) + 1)

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        """Raises: PocketMQError: the file exists but cannot be read."""
        data = read_json(self.path)
        table = data.get("offsetTable") if isinstance(data, dict) else None
        for level, offset in (table or {}).items():
            try:
                if int(level) in self.levels:
                    self.offsets[int(level)] = int(offset)
            except (TypeError, ValueError) as exc:
                raise PocketMQError(f"{self.path}: bad offset {level!r}: {offset!r}") from exc

    def encode(self) -> dict[str, dict[int, int]]:
        """What delayOffset.json holds and GET_ALL_DELAY_OFFSET answers: the next offset of
        each level's queue."""
        return {"offsetTable": dict(sorted(self.offsets.items()))}

    def install(self, table: dict[int, int]) -> None:
        """A slave takes its master's progress in place of its own and writes it (RocketMQ
        writes the master's delayOffset.json over the slave's); a slave delivers nothing, so
        this is where the levels resume once it becomes master."""
        self.offsets = {level: offset for level, offset in table.items() if level in self.levels}
        self._dirty = True
        self.persist()

    def _advance(self, level: int, offset: int) -> None:
        self.offsets[level] = offset
        self._dirty = True

    # ------------------------------------------------------------------ send side

    def rewrite(self, msg: MessageExt) -> None:
        """Send a delayed message to its level's schedule queue (levels above the last are
        clamped to it); a message with no or a non-positive level is left alone."""
        level = delay_level(msg.properties)
        tx = msg.sys_flag & SysFlag.TRANSACTION_ROLLBACK_TYPE
        if level <= 0 or tx not in (SysFlag.TRANSACTION_NOT_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE):
            return
        level = min(level, self.max_level)
        msg.properties[MessageConst.DELAY_TIME_LEVEL] = str(level)
        msg.properties[MessageConst.REAL_TOPIC] = msg.topic
        msg.properties[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def on_message_arrived(self, topic: str, queue_id: int, queue_offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            wake = self._wake.get(queue_id + 1)
            if wake is not None:
                wake.set()

    # ------------------------------------------------------------------ delivery

    async def start(self) -> None:
        for level in self.levels:
            await self._skip_delivered(level)
        self._tasks = [
            asyncio.create_task(run_when_due(functools.partial(self.deliver_due, level), wake))
            for level, wake in self._wake.items()
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        self.persist()

    def _start_offset(self, level: int) -> int:
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        offset = self.offsets.get(level, 0)
        if cq is not None and offset < cq.min_offset_in_queue():
            log.warning("delay level %d: offset %d was removed, continuing at %d",
                        level, offset, cq.min_offset_in_queue())  # fmt: skip
            offset = cq.min_offset_in_queue()
        return offset

    async def _skip_delivered(self, level: int) -> None:
        """After a crash: move past messages re-put after the last saved offset."""
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return
        for qo, phy, _size, _tags in cq.iter_units(self._start_offset(level)):
            msg = self.store.look_message_by_offset(phy)
            if msg is None or not already_delivered(self.store, msg, self.clock.now_ms()):
                return
            self._advance(level, qo + 1)

    def _deliver_time(self, level: int, tags_code: int, now_ms: int) -> int:
        # A delivery time beyond now + the level's delay is impossible (a clock step back, a
        # damaged unit): deliver at once rather than hold the whole level.
        return now_ms if tags_code > now_ms + self.levels_ms[level - 1] else tags_code

    async def deliver_due(self, level: int) -> int | None:
        """Re-put every due message of the level; returns ms until the next one is due (None:
        the level is empty, wait for an arrival)."""
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None
        for qo, phy, _size, tags_code in cq.iter_units(self._start_offset(level)):
            now = self.clock.now_ms()
            due = self._deliver_time(level, tags_code, now)
            if due > now:
                return due - now
            msg = self.store.look_message_by_offset(phy)
            again = None if msg is None else time_up(msg)
            if msg is None:
                log.error("delay level %d: no message at commitlog offset %d, skipped", level, phy)
            elif again is not None:
                result = await self.store.put_message(again)
                if not result.ok:
                    log.error(
                        "delay level %d: re-put of %s failed (%s), retrying in %.0f s",
                        level, msg.msg_id, result.status.name, RETRY_AFTER_FAILURE_MS / 1000,
                    )  # fmt: skip
                    return RETRY_AFTER_FAILURE_MS
            self._advance(level, qo + 1)
        return None
