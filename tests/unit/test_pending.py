"""pending.py: a result given later by a callback; from a task (``pending_of``) and to an
awaiting caller (``outcome_of``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pocketmq.pending import Pending, outcome_of, pending_of


async def test_a_tasks_result_or_exception_is_given_and_the_task_let_go() -> None:
    running: set[asyncio.Future[Any]] = set()

    async def fails() -> int:
        raise ValueError("no")

    async def ends(value: int) -> int:
        await asyncio.sleep(0)
        return value

    assert await outcome_of(pending_of(ends(7), running)) == 7
    with pytest.raises(ValueError, match="no"):
        await outcome_of(pending_of(fails(), running))
    assert not running


async def test_a_cancelled_task_gives_nothing() -> None:
    running: set[asyncio.Future[Any]] = set()
    given: list[object] = []
    later: Pending[int] = pending_of(asyncio.sleep(3600, 1), running)
    later.then = given.append
    [task] = running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)  # the done callback's turn
    assert given == [] and not running


async def test_a_waiter_gone_leaves_the_outcome_unclaimed_and_harmless() -> None:
    later: Pending[int] = Pending()
    waiter = asyncio.ensure_future(outcome_of(later))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    later.settle(5)  # its future is cancelled: nothing to give it


def test_a_result_nobody_took_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    Pending[int]().settle(3)
    assert "a result nobody took: 3" in caplog.text
