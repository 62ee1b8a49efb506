"""PutCoalescer: the producers' puts of one event-loop iteration appended as one. No I/O here.

Each put pays a fixed cost besides its messages': the record encode call, the space
reservation, the dispatch to consume queues and the index, the wake-ups of long polls and
of the prefault and HA services. Producers with sends in flight (pipelined sends on one
connection, many connections at once) deliver many puts in one read; coalesced, the puts of
an iteration take one CommitLog put, in the order they were made, and each still gets its own
result (``MessageStore.append_units``). The first put of an iteration is appended at once, so
a lone send waits for nothing (no timer, no batch size to fill); the later ones of the same
iteration are appended together when it ends, as RemotingChannel holds responses. Each put
is answered once acknowledged (``MessageStore.acknowledged``: at once under ASYNC_FLUSH without
a slave to wait for), so that a held put's waiter awaits one future and nothing else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pocketmq.protocol.message import MessageExt
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.results import PutResult, PutStatus

AppendUnits = Callable[[list[list[MessageExt]]], list[PutResult]]
# A put's result once it may be answered: itself, or a coroutine that waits (a flush, a slave).
Acknowledge = Callable[[PutResult, list[MessageExt]], PutResult | Coroutine[Any, Any, PutResult]]


class PutCoalescer:
    def __init__(self, append_units: AppendUnits, acknowledge: Acknowledge) -> None:
        self._append_units = append_units
        self._acknowledge = acknowledge
        # The puts held until this iteration ends; None when no put was made in it.
        self._pending: list[tuple[list[MessageExt], asyncio.Future[PutResult]]] | None = None
        # The task that made this iteration's first put, and the iteration's loop.
        self._first: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Held puts' acknowledgements still waiting (a reference keeps their tasks alive).
        self._waiting: set[asyncio.Future[PutResult]] = set()

    def append(self, msgs: list[MessageExt]) -> PutResult | Awaitable[PutResult]:
        """Append ``msgs`` (what ``MessageStore.append`` takes): the first put of an iteration
        at once (a lone send waits for nothing), later ones when the iteration ends, together.
        Each is answered acknowledged: the result itself when it waits for nothing, else an
        awaitable of it. A task that puts again before anyone else did (one caller's sequence
        of sends: a gRPC request's messages) is not held either: holding it would only cost it
        an iteration per two puts. A put made outside any task (a remoting send, made in the
        read that brought it) is nobody's sequence."""
        if self._pending is None:
            # get_running_loop makes a getpid system call on CPython 3.11: once an iteration.
            self._loop = running = asyncio.get_running_loop()
            self._pending = []
            self._first = asyncio.current_task(running)
            running.call_soon(self._append_pending)
        else:
            loop = self._loop
            assert loop is not None
            task = asyncio.current_task(loop)
            if self._pending or task is None or task is not self._first:
                fut: asyncio.Future[PutResult] = loop.create_future()
                self._pending.append((msgs, fut))
                return fut
        return self._acknowledge(self._append_units([msgs])[0], msgs)

    def _append_pending(self) -> None:
        pending, self._pending, self._first = self._pending, None, None
        if not pending:
            return
        try:
            results = self._append_units([msgs for msgs, _ in pending])
        except Exception as exc:  # each waiter answers its own request; the next puts run
            for _, fut in pending:
                if not fut.done():
                    fut.set_exception(exc)
            return
        # A waiter cancelled meanwhile (its connection closed) leaves its messages stored
        # unacknowledged, as a crash after the append would: its producer retries.
        for (msgs, fut), result in zip(pending, results, strict=True):
            if fut.done():
                continue
            try:
                acknowledged = self._acknowledge(result, msgs)
            except Exception as exc:  # that waiter's answer; the others go on
                fut.set_exception(exc)
                continue
            if isinstance(acknowledged, PutResult):
                fut.set_result(acknowledged)
            else:  # a flush or a slave to wait for, in a task of its own
                waiting = asyncio.ensure_future(acknowledged)
                self._waiting.add(waiting)
                waiting.add_done_callback(self._waiting.discard)
                waiting.add_done_callback(functools.partial(_settle, fut))


def _settle(fut: asyncio.Future[PutResult], done: asyncio.Future[PutResult]) -> None:
    """Give ``fut`` what ``done`` ended with, unless its waiter is gone."""
    if fut.done():
        return
    if done.cancelled():
        fut.cancel()
    elif (exc := done.exception()) is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(done.result())


def split_put(result: PutResult, reqs: list[DispatchRequest], counts: list[int]) -> list[PutResult]:
    """The results of consecutive units of ``counts`` messages each, from the successful
    ``result`` of their one put and its dispatch requests (one per message, in order)."""
    out: list[PutResult] = []
    ok, stored, host = PutStatus.PUT_OK, result.store_timestamp, result.store_host
    start = 0
    for count in counts:
        if count == 1:  # a single send: most units
            req = reqs[start]
            out.append(PutResult(ok, [req.phy_offset], req.queue_offset, req.size, stored, host))
        else:
            part = reqs[start : start + count]
            size = sum(req.size for req in part)
            offsets = [req.phy_offset for req in part]
            out.append(PutResult(ok, offsets, part[0].queue_offset, size, stored, host))
        start += count
    return out
