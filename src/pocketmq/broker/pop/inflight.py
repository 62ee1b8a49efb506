"""What a broker's POP groups have in flight: the table of messages popped and not yet done
with, a heap of their deadlines, and per FIFO queue what was done past the committed offset.

Pure data structures: no store, no offsets, no clock (times are passed in). The service
keeps them consistent with the revive log and the groups' offsets.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

# (group, topic popped from, queue id, queue offset)
Key = tuple[str, str, int, int]
# (group, topic, queue id)
QueueKey = tuple[str, str, int]


@dataclass(slots=True)
class InFlight:
    pop_time: int  # tells this delivery from the ones it replaced
    deadline: int
    ck_offset: int  # where its checkpoint record is in the revive queue (-1: being stored)
    reconsume: int  # deliveries before this one
    fifo: bool
    subscribed: str  # the topic the consumer asked for


@dataclass(slots=True)
class FifoQueue:
    """What a FIFO group has done past its committed offset in one queue."""

    done: set[int] = field(default_factory=set)  # acked, dead-lettered or filtered out
    attempts: dict[int, int] = field(default_factory=dict)  # deliveries so far

    def advance(self, committed: int) -> int:
        """The committed offset moved over every message done in a row from it."""
        while committed in self.done:
            self.done.discard(committed)
            self.attempts.pop(committed, None)
            committed += 1
        return committed


class InFlightTable:
    """Each key in flight once, with the delivery (pop time) that holds it. The deadline heap
    may keep entries of deliveries replaced since; they are skipped when they come up."""

    def __init__(self) -> None:
        self._entries: dict[Key, InFlight] = {}
        self._deadlines: list[tuple[int, Key, int]] = []  # (deadline, key, pop time)
        self._fifo: dict[QueueKey, FifoQueue] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> InFlight | None:
        return self._entries.get(key)

    def add(self, key: Key, entry: InFlight) -> bool:
        """Put (or replace) the delivery of ``key``; True when its deadline is now the
        earliest, so that whoever waits for the earliest must look again."""
        self._entries[key] = entry
        self.schedule(key, entry)
        return self._deadlines[0][1] == key

    def schedule(self, key: Key, entry: InFlight) -> None:
        """Have ``entry`` come up again at its (new) deadline."""
        heapq.heappush(self._deadlines, (entry.deadline, key, entry.pop_time))

    def remove(self, key: Key) -> None:
        del self._entries[key]

    def pop_due(self, now: int) -> tuple[Key, InFlight] | None:
        """The next delivery whose deadline is at or before ``now``, taken off the heap."""
        while self._deadlines and self._deadlines[0][0] <= now:
            _, key, pop_time = heapq.heappop(self._deadlines)
            entry = self._entries.get(key)
            if entry is not None and entry.pop_time == pop_time:
                return key, entry
        return None

    def ms_until_next(self, now: int) -> int | None:
        """Until the earliest deadline on the heap (None: nothing in flight)."""
        return self._deadlines[0][0] - now if self._deadlines else None

    def oldest_checkpoint(self) -> int | None:
        """The revive-queue offset of the oldest checkpoint still in flight."""
        # A checkpoint still being stored (offset -1) lands at or past the queue's end.
        return min((e.ck_offset for e in self._entries.values() if e.ck_offset >= 0), default=None)

    # ------------------------------------------------------------------ FIFO queues

    def fifo_queue(self, queue: QueueKey) -> FifoQueue:
        return self._fifo.setdefault(queue, FifoQueue())

    def fifo_queue_if_any(self, queue: QueueKey) -> FifoQueue | None:
        return self._fifo.get(queue)

    def fifo_queues(self) -> list[QueueKey]:
        return list(self._fifo)

    def blocked(self, queue: QueueKey, now: int) -> bool:
        """A FIFO queue with a message still invisible: nothing after it may be delivered."""
        state = self._fifo.get(queue)
        if state is None or not state.attempts:
            return False
        group, topic, queue_id = queue
        return any(
            (entry := self._entries.get((group, topic, queue_id, offset))) is not None
            and entry.deadline > now
            for offset in state.attempts
        )
