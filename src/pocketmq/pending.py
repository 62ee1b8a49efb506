"""Pending: a result given later by a callback rather than by a future.

A future's callbacks run in a later turn of the loop, and a task per waiter costs a coroutine
and a step of its own; many requests that wait for one event (the sends of a read, for the put
that stores them all) are answered cheapest by plain calls from the callback that ends the
event (BENCHMARKS.md, "Held sends answered by callback"). Whoever receives a Pending sets its
``then``; a layer that makes something else of the result returns a Pending of its own and sets
the one it received to give it that.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def _unclaimed(outcome: object) -> None:
    log.error("a result nobody took: %r", outcome)


class Pending(Generic[T]):
    """A result to come, or the exception that ended the work: ``then`` is called with it,
    once."""

    # A class default rather than an __init__: a send held for a coalesced put makes three
    # of these, and a Python __init__ would be a frame each.
    then: Callable[[T | Exception], None] = staticmethod(_unclaimed)

    def settle(self, outcome: T | Exception) -> None:
        """``then(outcome)``, looked up now: for a callback named before anyone took this (a
        task's done callback, ``call_soon``)."""
        self.then(outcome)


def pending_of(awaitable: Awaitable[T], running: set[asyncio.Future[Any]]) -> Pending[T]:
    """A Pending given what ``awaitable`` ends with, run in a task of its own that ``running``
    holds until then. A task cancelled (its loop closing) gives nothing: nobody is left to
    answer."""
    later: Pending[T] = Pending()
    task = asyncio.ensure_future(awaitable)
    running.add(task)
    task.add_done_callback(functools.partial(_settle_with, later, running))
    return later


def _settle_with(
    later: Pending[T], running: set[asyncio.Future[Any]], task: asyncio.Future[T]
) -> None:
    running.discard(task)
    if task.cancelled():
        return
    exc = task.exception()
    if exc is None:
        later.then(task.result())
    elif isinstance(exc, Exception):
        later.then(exc)


async def outcome_of(pending: Pending[T]) -> T:
    """What ``pending`` is given, awaited: its result, or its exception raised."""
    done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    pending.then = functools.partial(_resolve, done)
    return await done


def _resolve(fut: asyncio.Future[T], outcome: T | Exception) -> None:
    if fut.done():  # its waiter is gone (cancelled)
        return
    if isinstance(outcome, Exception):
        fut.set_exception(outcome)
    else:
        fut.set_result(outcome)
