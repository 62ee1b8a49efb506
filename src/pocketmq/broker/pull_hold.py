"""PullHold: long-polling pulls parked until a message arrives (PullRequestHoldService).

A pull that finds nothing waits on its queue; the store's dispatch calls ``notify`` for each
consume-queue unit it writes, which wakes the pulls waiting at or below that offset. Waiting
is event-driven: no polling interval adds latency.
"""

from __future__ import annotations

import asyncio


class PullHold:
    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = {}
        # Pulls woken by ``notify`` so far: a sender compares it around its put.
        self.woken = 0

    async def wait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        released_by: asyncio.Future[None] | None = None,
    ) -> bool:
        """Wait until a message at offset or later arrives (True), ``timeout_s`` pass or
        ``released_by`` (the request's connection closing) is done (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = (topic, queue_id)
        entry = (offset, fut)

        def release(_: object) -> None:
            if not fut.done():
                fut.set_result(None)

        if released_by is not None:
            released_by.add_done_callback(release)
        self._waiters.setdefault(key, []).append(entry)
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
            # races the future's completion, and a closing broker would wait on this pull.
            async with asyncio.timeout(timeout_s):
                await fut
            return released_by is None or not released_by.done()
        except TimeoutError:
            return False
        finally:
            if released_by is not None:
                released_by.remove_done_callback(release)
            waiters = self._waiters.get(key)
            if waiters is not None:
                if entry in waiters:
                    waiters.remove(entry)
                if not waiters:
                    del self._waiters[key]

    def notify(self, topic: str, queue_id: int, queue_offset: int) -> None:
        waiters = self._waiters.get((topic, queue_id))
        if not waiters:
            return
        for offset, fut in waiters:
            if offset <= queue_offset and not fut.done():
                fut.set_result(None)
                self.woken += 1

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(None)
