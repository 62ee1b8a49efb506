"""Background asyncio tasks shared by the servers and the client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
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


def start_eagerly(coro: Coroutine[Any, Any, T]) -> T | Awaitable[T]:
    """Run ``coro`` up to its first suspension now: its result if it finished, else an
    awaitable of the rest (for a Task, as if the Task had run the first step itself).

    For a request handler that usually finishes without waiting (a send under ASYNC_FLUSH):
    a Task of its own would cost an object, a loop turn before it starts and another
    scheduling of its steps. Python 3.12's eager task factory does this for every task;
    3.11 has none. Unlike it, the first step runs in no Task: ``asyncio.current_task()`` is
    None there and ``asyncio.timeout`` refuses to start, so only a coroutine whose first step
    needs neither may be started so.

    Raises:
        Exception: whatever the first step raises.
    """
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    return _resumed(coro, yielded)


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, T], yielded: Any) -> Generator[Any, Any, T]:
    """Drive ``coro`` on from a suspension that yielded ``yielded``, passing its yields to
    the Task awaiting this and the Task's answers (a value, or an exception to throw: a
    cancellation) back, as ``yield from`` would after the first step."""
    step: Callable[[Any], Any] = coro.send
    arg: Any = None
    # A bare yield (asyncio.sleep(0)) asked for one loop turn: the Task's first step is it.
    if yielded is not None:
        try:
            arg = yield yielded
        except BaseException as exc:  # forwarded, as yield from forwards what is thrown in
            step, arg = coro.throw, exc
    while True:
        try:
            yielded = step(arg)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            arg = yield yielded
            step = coro.send
        except BaseException as exc:
            step, arg = coro.throw, exc
