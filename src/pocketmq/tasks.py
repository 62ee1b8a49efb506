"""Background asyncio tasks shared by the servers and the client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[Any] | None], *, ignore_errors: bool = False
) -> None:
    """Cancel every task, then wait until each has finished unwinding, so that a stop returns
    only when no duty of the stopped object can still run.

    Args:
        ignore_errors: also swallow the error a task had already failed with, for a
            ``finally`` that abandons work in flight while an error of its own unwinds.
    """
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    ignored = (asyncio.CancelledError, Exception) if ignore_errors else (asyncio.CancelledError,)
    for task in running:
        with contextlib.suppress(*ignored):
            await task


# How long run_when_due waits after its work failed before trying again.
RETRY_AFTER_ERROR_MS = 1_000


async def run_when_due(due_work: Callable[[], Awaitable[int | None]], wake: asyncio.Event) -> None:
    """Forever: do what is due, then wait until ``due_work`` says more will be (ms; None:
    nothing pending) or until ``wake`` is set, whichever comes first.

    The loop of the delay, timer and POP revive services; their ``due_work`` reads the clock,
    so a test calls it directly after advancing a fake one. ``wake`` is cleared before the work,
    so that an arrival during it is not missed. Work that fails is logged and tried again
    after RETRY_AFTER_ERROR_MS.
    """
    while True:
        wake.clear()
        try:
            wait_ms = await due_work()
        except Exception:  # a task boundary: a dead loop would hold its messages forever
            log.exception("%s failed; retrying in %d ms", due_work, RETRY_AFTER_ERROR_MS)
            wait_ms = RETRY_AFTER_ERROR_MS
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(None if wait_ms is None else wait_ms / 1000):
                await wake.wait()
