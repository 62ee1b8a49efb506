"""Waiting for a condition in tests: poll it until it holds, then go on at once, instead of
sleeping a fixed time and hoping it was long enough.

A timeout fails with an AssertionError naming what was awaited. ``what`` may be a callable, so
that the message can show the state at the moment of failure. Sleeps that are themselves the
behaviour under test ("nothing more arrives within 1 s") stay sleeps, with a comment.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

Description = str | Callable[[], str]


def _timed_out(timeout_s: float, what: Description) -> AssertionError:
    text = what() if callable(what) else what
    return AssertionError(f"timed out after {timeout_s:g} s waiting for {text}")


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    timeout_s: float,
    what: Description,
    *,
    interval_s: float = 0.02,
) -> None:
    """Return once ``predicate()`` (a plain or an async function) is true.

    Raises:
        AssertionError: still false after ``timeout_s``, or an awaited predicate hung past it.
    """
    timeout = asyncio.timeout(timeout_s)
    try:
        async with timeout:
            while True:
                result = predicate()
                if inspect.isawaitable(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(interval_s)
    except TimeoutError:
        if timeout.expired():
            raise _timed_out(timeout_s, what) from None
        raise


def wait_until_sync(
    predicate: Callable[[], bool], timeout_s: float, what: Description, *, interval_s: float = 0.05
) -> None:
    """``wait_until`` for code outside an event loop (threads, subprocess scripts).

    Raises:
        AssertionError: still false after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise _timed_out(timeout_s, what)
        time.sleep(interval_s)
