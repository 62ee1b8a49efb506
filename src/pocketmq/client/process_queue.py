"""ProcessQueue: the messages of one held queue pulled and not yet consumed, by offset.

In-flight messages are kept by offset, so the offset to commit is always the lowest message not
yet consumed (at-least-once: a crash re-delivers, never skips). Its counters drive flow control:
the queue's pulls pause while it holds too much and resume when consumption frees space.
Orderly consumption also keeps here the queue's broker lock and the batch being consumed.
``hold_messages`` and ``release_messages`` (C in ``_native/held.c``, the ``*_py`` functions the
reference) do a batch's bookkeeping in one call. No I/O here.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import Final

from pocketmq.client.route import MessageQueue
from pocketmq.protocol import native
from pocketmq.protocol.message import MessageExt


def hold_messages_py(held: dict[int, MessageExt], msgs: Iterable[MessageExt]) -> tuple[int, int]:
    """Adds to ``held`` (offset -> message) each message whose offset it lacks; returns the
    bytes of the bodies added and the highest offset added (-1: none)."""
    size, highest = 0, -1
    for m in msgs:
        offset = m.queue_offset
        if offset not in held:
            held[offset] = m
            size += len(m.body)
            if offset > highest:
                highest = offset
    return size, highest


def release_messages_py(held: dict[int, MessageExt], msgs: Iterable[MessageExt]) -> int:
    """Removes the messages' offsets from ``held``; returns the bytes of the bodies of those
    that were there."""
    pop, freed = held.pop, 0
    for m in msgs:
        if pop(m.queue_offset, None) is not None:
            freed += len(m.body)
    return freed


hold_messages: Final = native.select("hold_messages", hold_messages_py)
release_messages: Final = native.select("release_messages", release_messages_py)


class ProcessQueue:
    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset  # the next offset to pull
        # Pulls append in offset order and removals keep it: the first key is the lowest.
        self.msgs: dict[int, MessageExt] = {}
        self.size_bytes = 0
        self.max_offset = -1
        self.dropped = False
        self.space = asyncio.Event()
        self.space.set()
        self.task: asyncio.Task[None] | None = None
        # Orderly consumption: the broker lock, the batch being consumed, new-message signal.
        self.locked = False
        self.last_lock_ms = 0.0  # on the client clock's monotonic reading
        self.taken: dict[int, MessageExt] = {}
        self.arrived = asyncio.Event()
        self.consume_task: asyncio.Task[None] | None = None

    def is_full(self, max_msgs: int, max_bytes: int) -> bool:
        """Whether pulls should wait: this many messages or bytes are held unconsumed."""
        return len(self.msgs) >= max_msgs or self.size_bytes >= max_bytes

    async def wait_for_space(self) -> None:
        """Until consumption frees some space (or the queue is dropped)."""
        self.space.clear()
        await self.space.wait()

    def put(self, msgs: Iterable[MessageExt]) -> None:
        size, highest = hold_messages(self.msgs, msgs)
        self.size_bytes += size
        if highest > self.max_offset:
            self.max_offset = highest

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit (-1: nothing held)."""
        held = self.msgs
        if not held:
            return -1
        self.size_bytes -= release_messages(held, msgs)
        self.space.set()
        return next(iter(held)) if held else self.max_offset + 1

    def drop(self) -> None:
        self.dropped = True
        self.space.set()
        self.arrived.set()
        if self.task is not None:
            self.task.cancel()

    def take(self, count: int) -> list[MessageExt]:
        """Orderly: the next ``count`` messages in offset order, held until commit/rollback."""
        batch = []
        for offset in list(itertools.islice(self.msgs, count)):
            m = self.msgs.pop(offset)
            self.taken[offset] = m
            batch.append(m)
        return batch

    def commit(self) -> int:
        """Orderly: the taken batch is consumed; returns the offset after it."""
        if not self.taken:
            return -1
        offset = max(self.taken) + 1
        self.size_bytes -= sum(len(m.body) for m in self.taken.values())
        self.taken.clear()
        self.space.set()
        return offset

    def rollback(self) -> None:
        """Orderly: put the taken batch back in front, to be consumed again."""
        self.msgs = {**self.taken, **self.msgs}
        self.taken.clear()
