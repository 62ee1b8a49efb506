"""Background threads of the store: CommitLog flushing (periodic or group commit) and
housekeeping (consume queue / index flushes, the checkpoint, retention, disk checks).

Runs on its own threads. Blocking calls here (fdatasync, unlink) release the GIL, so the event
loop keeps serving while the disk works.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
    deadline: float  # time.monotonic() after which the put gives up (FLUSH_DISK_TIMEOUT)
    loop: asyncio.AbstractEventLoop
    then: Callable[[bool], None]  # called on ``loop``, once


def _answer(answers: list[tuple[Callable[[bool], None], bool]]) -> None:
    for then, ok in answers:
        try:
            then(ok)
        except Exception:  # one waiter's failure leaves the others answered
            log.exception("answering a put waiting for a flush failed")


def _resolve_all(requests: list[_FlushRequest], ok: bool) -> None:
    """Answer requests on their own loops, one cross-thread call per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Callable[[bool], None], bool]]] = {}
    for r in requests:
        by_loop.setdefault(r.loop, []).append((r.then, ok))
    for loop, batch in by_loop.items():
        # A closed loop raises RuntimeError: nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_answer, batch)


def _set_unless_done(fut: asyncio.Future[bool], ok: bool) -> None:
    if not fut.done():  # its waiter is gone (cancelled)
        fut.set_result(ok)


class FlushCommitLogService:
    """ASYNC_FLUSH: fdatasync every interval. SYNC_FLUSH: group commit, pipelined - while one
    fdatasync runs, puts keep appending and queue their requests; the moment it returns, every
    request it covered (by end offset, however late the request arrived) is resolved on its
    event loop and the next fdatasync starts at once if any request is left, covering all
    that was appended meanwhile. A put waits at most for the rest of the sync running when it
    appended, then for the one after.

    Puts still waiting after sync_flush_timeout are answered False by ``expire`` (called from
    the housekeeping thread, so a hung disk cannot hold them forever)."""

    def __init__(
        self,
        commitlog: CommitLog,
        sync_flush: bool,
        interval_ms: int,
        timeout_ms: int,
        on_flushed: Callable[[int], None],
    ) -> None:
        self.commitlog = commitlog
        self.sync_flush = sync_flush
        self.interval_s = interval_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self.on_flushed = on_flushed
        self._cond = threading.Condition()
        self._pending: list[_FlushRequest] = []
        self._idle = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="pocketmq-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def durable_through(self) -> int:
        """The CommitLog offset up to which a sync has made everything durable."""
        return self.commitlog.mfq.flushed_where

    def when_durable(
        self, next_offset: int, loop: asyncio.AbstractEventLoop, then: Callable[[bool], None]
    ) -> None:
        """Call ``then(True)`` on ``loop`` once the CommitLog is durable up to next_offset, or
        ``then(False)`` if that does not happen within the timeout; never from this call. A
        callback rather than a future: a put waiting for a flush needs no future, coroutine or
        task of its own (BENCHMARKS.md, "SYNC_FLUSH puts answered by callback")."""
        if next_offset <= self.commitlog.mfq.flushed_where:
            loop.call_soon(then, True)  # a sync that began after these bytes were written ended
            return
        with self._cond:
            if self._stopped:
                loop.call_soon(then, False)
                return
            self._pending.append(
                _FlushRequest(next_offset, time.monotonic() + self.timeout_s, loop, then)
            )
            if self._idle:
                self._cond.notify()

    def request(self, next_offset: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """``when_durable`` as a future of its answer."""
        fut: asyncio.Future[bool] = loop.create_future()
        self.when_durable(next_offset, loop, functools.partial(_set_unless_done, fut))
        return fut

    def expire(self) -> None:
        now = time.monotonic()
        with self._cond:
            late = [r for r in self._pending if r.deadline <= now]
            if late:
                self._pending = [r for r in self._pending if r.deadline > now]
        if late:
            log.warning("%d puts not flushed within %.1f s", len(late), self.timeout_s)
            _resolve_all(late, False)

    def abandon_beyond(self, phy_offset: int) -> None:
        """Answer False to the puts waiting for bytes past ``phy_offset``: the store was cut
        there (store/truncate.py), so those bytes will never be durable."""
        with self._cond:
            gone = [r for r in self._pending if r.next_offset > phy_offset]
            if gone:
                self._pending = [r for r in self._pending if r.next_offset <= phy_offset]
        if gone:
            log.warning("%d puts waiting for a flush were cut off by a truncation", len(gone))
            _resolve_all(gone, False)

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
                if not self._pending and not self._stopped:
                    self._idle = True
                    self._cond.wait(0.01 if self.sync_flush else self.interval_s)
                    self._idle = False
                stopped = self._stopped
            try:
                flushed = self._flush_once()
                ok = True
            except Exception as exc:  # a thread boundary: the store must learn of it
                # A failed fdatasync may have dropped dirty pages: nothing after the last good
                # flush can be promised durable, so the store stops taking writes.
                log.error("commitlog flush failed: %s", exc)
                self.commitlog.fail_writes(exc, "commitlog flush failed")
                flushed = self.commitlog.mfq.flushed_where
                ok = False
            # Requests queued while the sync ran are checked too: their bytes may be covered.
            with self._cond:
                if ok:
                    done = [r for r in self._pending if r.next_offset <= flushed]
                    if done:
                        self._pending = [r for r in self._pending if r.next_offset > flushed]
                else:
                    done, self._pending = self._pending, []
            if done:
                _resolve_all(done, ok)
            if stopped:
                with self._cond:
                    rest, self._pending = self._pending, []
                _resolve_all(rest, False)
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
