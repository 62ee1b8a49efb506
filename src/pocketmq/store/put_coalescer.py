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
a slave to wait for, from the flush's callback under SYNC_FLUSH), through a callback rather
than a future: a task and a future for each of an iteration's held puts cost a remoting send at
c=32 about a tenth of its broker CPU (BENCHMARKS.md, "Held sends answered by callback"). A put
whose request's connection closed meanwhile stays stored, its answer dropped, as after a crash
following the append: its producer retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pocketmq.pending import Pending
from pocketmq.protocol.message import MessageExt
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.results import PutResult, PutStatus

log = logging.getLogger(__name__)

AppendUnits = Callable[[list[list[MessageExt]]], list[PutResult]]
# A put's result once it may be answered: itself, or a Pending of it (a flush, a slave).
Acknowledge = Callable[[PutResult, list[MessageExt]], PutResult | Pending[PutResult]]


class PutCoalescer:
    def __init__(self, append_units: AppendUnits, acknowledge: Acknowledge) -> None:
        self._append_units = append_units
        self._acknowledge = acknowledge
        # The puts held until this iteration ends; None when no put was made in it.
        self._pending: list[tuple[list[MessageExt], Pending[PutResult]]] | None = None
        # The task that made this iteration's first put, and the iteration's loop.
        self._first: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def append_run(
        self, units: list[list[MessageExt]]
    ) -> list[PutResult | Pending[PutResult] | Exception]:
        """Append puts (each what ``MessageStore.append`` takes) made together, in their order:
        an iteration's first puts at once, in one CommitLog put (a lone send waits for
        nothing: no timer, no batch size to fill), later ones together when the iteration
        ends. Each put's acknowledged result when nothing is left to wait for, the exception
        its acknowledgement raised, or else a Pending of either: the puts held in an iteration
        are answered from the callback that appends them, with no task or future each. A task
        that puts again before anyone else did (one caller's sequence of sends: a gRPC
        request's messages) is not held: holding it would only cost it an iteration per two
        puts. A put made outside any task (a remoting send, made in the read that brought it)
        is nobody's sequence.

        Raises:
            Exception: what the append at once raised (then nothing was appended).
        """
        if self._pending is None:
            # get_running_loop makes a getpid system call on CPython 3.11, once an iteration:
            # at one send a read, once a send. The loop that took the last put is still this
            # thread's when it is running (one loop a thread; puts come from the loop's thread).
            running = self._loop
            if running is None or not running.is_running():
                self._loop = running = asyncio.get_running_loop()
            self._pending = []
            self._first = asyncio.current_task(running)
            running.call_soon(self._append_pending)
        else:
            task = asyncio.current_task(self._loop)
            if self._pending or task is None or task is not self._first:
                held: list[PutResult | Pending[PutResult] | Exception] = []
                for msgs in units:
                    later: Pending[PutResult] = Pending()
                    self._pending.append((msgs, later))
                    held.append(later)
                return held
        out: list[PutResult | Pending[PutResult] | Exception] = []
        for msgs, result in zip(units, self._append_units(units), strict=True):
            try:
                out.append(self._acknowledge(result, msgs))
            except Exception as exc:  # that put's answer; the others go on
                out.append(exc)
        return out

    def _append_pending(self) -> None:
        pending, self._pending, self._first = self._pending, None, None
        if not pending:
            return
        try:
            results = self._append_units([msgs for msgs, _ in pending])
        except Exception as exc:  # each put answers its own request; the next puts run
            for _, held in pending:
                _answer(held, exc)
            return
        for (msgs, held), result in zip(pending, results, strict=True):
            try:
                acknowledged = self._acknowledge(result, msgs)
            except Exception as exc:  # that put's answer; the others go on
                _answer(held, exc)
                continue
            if isinstance(acknowledged, PutResult):
                _answer(held, acknowledged)
            else:  # a flush or a slave to wait for
                acknowledged.then = held.settle


def _answer(held: Pending[PutResult], outcome: PutResult | Exception) -> None:
    """Give a held put its outcome; one answer that fails leaves the iteration's others
    answered."""
    try:
        held.then(outcome)
    except Exception:
        log.exception("answering a put failed")


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
