"""Background threads of the store: CommitLog flushing (periodic or group commit) and
housekeeping (consume queue / index flushes, the checkpoint, retention, disk checks).

Runs on its own threads. Blocking calls here (fdatasync, unlink) release the GIL, so the event
loop keeps serving while the disk works.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _FlushRequest:
    next_offset: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool]


def _resolve(batch: list[tuple[asyncio.Future[bool], bool]]) -> None:
    for fut, ok in batch:
        if not fut.done():
            fut.set_result(ok)


class FlushCommitLogService:
    """ASYNC_FLUSH: fdatasync every interval. SYNC_FLUSH: group commit - each wake-up syncs
    once for every put waiting, and resolves their futures on their event loops."""

    def __init__(
        self,
        commitlog: CommitLog,
        sync_flush: bool,
        interval_ms: int,
        on_flushed: Callable[[int], None],
    ) -> None:
        self.commitlog = commitlog
        self.sync_flush = sync_flush
        self.interval_s = interval_ms / 1000
        self.on_flushed = on_flushed
        self._cond = threading.Condition()
        self._requests: list[_FlushRequest] = []
        self._stopped = False
        self._wakeup = False
        self._thread = threading.Thread(target=self._run, name="pocketmq-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, next_offset: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """A future that becomes True once the CommitLog is durable up to next_offset."""
        fut: asyncio.Future[bool] = loop.create_future()
        with self._cond:
            if self._stopped:
                fut.set_result(False)
                return fut
            self._requests.append(_FlushRequest(next_offset, loop, fut))
            self._cond.notify()
        return fut

    def wakeup(self) -> None:
        with self._cond:
            self._wakeup = True
            self._cond.notify()

    def _flush_once(self) -> int:
        last = self.commitlog.mfq.last()
        ts = last.store_timestamp if last is not None else 0
        flushed = self.commitlog.flush()
        if ts:
            self.on_flushed(ts)
        return flushed

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._requests and not self._stopped and not self._wakeup:
                    self._cond.wait(0.01 if self.sync_flush else self.interval_s)
                requests, self._requests = self._requests, []
                stopped = self._stopped
                self._wakeup = False
            try:
                flushed = self._flush_once()
                if requests and flushed < max(r.next_offset for r in requests):
                    flushed = self._flush_once()
                ok_error = True
            except OSError as exc:
                # A failed fdatasync may have dropped dirty pages: nothing after the last good
                # flush can be promised durable, so the store stops taking writes.
                log.error("commitlog flush failed: %s", exc)
                self.commitlog.write_error = f"commitlog flush failed: {exc}"
                flushed = self.commitlog.mfq.flushed_where
                ok_error = False
            if requests:
                by_loop: dict[
                    asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], bool]]
                ] = {}
                for r in requests:
                    by_loop.setdefault(r.loop, []).append(
                        (r.future, ok_error and flushed >= r.next_offset)
                    )
                for loop, batch in by_loop.items():
                    # A closed loop raises RuntimeError: nobody is waiting any more.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(_resolve, batch)
            if stopped:
                return

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        else:
            self._flush_once()


class HousekeepingService:
    """Runs ``tasks`` (name, interval ms, callable) on one thread until stopped."""

    def __init__(self, tasks: list[tuple[str, int, Callable[[], None]]]) -> None:
        self.tasks = tasks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pocketmq-housekeeping", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        next_run = {name: time.monotonic() + interval / 1000 for name, interval, _ in self.tasks}
        while not self._stop.is_set():
            now = time.monotonic()
            for name, interval, fn in self.tasks:
                if now >= next_run[name]:
                    next_run[name] = now + interval / 1000
                    try:
                        fn()
                    except Exception:  # a task boundary: log and keep the other tasks alive
                        log.exception("housekeeping task %s failed", name)
            wait = min(next_run.values()) - time.monotonic()
            self._stop.wait(max(0.005, wait))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
