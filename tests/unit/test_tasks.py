"""tasks.start_eagerly: a coroutine run to its first suspension at once, then on in a Task as
if the Task had started it (its waits, its cancellation, its single turn for a bare yield)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from pocketmq.tasks import start_eagerly


async def test_a_coroutine_that_never_waits_is_done_in_the_call() -> None:
    async def answer() -> int:
        return 42

    assert start_eagerly(answer()) == 42


async def test_the_first_step_runs_in_the_call_and_its_errors_reach_the_caller() -> None:
    ran: list[str] = []

    async def refuses() -> int:
        ran.append("first step")
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        start_eagerly(refuses())
    assert ran == ["first step"]


async def test_a_coroutine_that_waits_goes_on_in_a_task_with_what_it_awaited() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    steps: list[str] = []

    async def waits() -> int:
        steps.append("before")
        value = await fut
        steps.append("after")
        return value + 1

    rest = start_eagerly(waits())
    assert steps == ["before"]
    assert inspect.isawaitable(rest)  # as RemotingChannel tells a handler's answer
    task = asyncio.ensure_future(rest)
    await asyncio.sleep(0)
    assert not task.done()
    fut.set_result(1)
    assert await task == 2
    assert steps == ["before", "after"]


async def test_a_bare_yield_costs_one_turn_of_the_loop_as_in_a_task() -> None:
    async def yields_once() -> str:
        await asyncio.sleep(0)
        return "done"

    rest = start_eagerly(yields_once())
    assert not isinstance(rest, str)
    task = asyncio.ensure_future(rest)
    await asyncio.sleep(0)  # the task's first step: the coroutine's turn was that
    assert task.done() and task.result() == "done"


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    unwound: list[str] = []

    async def waits_forever() -> None:
        try:
            await never
        except asyncio.CancelledError:
            unwound.append("cancelled")
            raise

    rest = start_eagerly(waits_forever())
    assert rest is not None
    task = asyncio.ensure_future(rest)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert unwound == ["cancelled"]
    assert never.cancelled()


async def test_an_error_after_a_wait_is_the_tasks_error() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def fails_later() -> None:
        await fut
        raise RuntimeError("later")

    rest = start_eagerly(fails_later())
    assert rest is not None
    task = asyncio.ensure_future(rest)
    fut.set_result(None)
    with pytest.raises(RuntimeError, match="later"):
        await task
