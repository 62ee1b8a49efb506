"""Background asyncio tasks shared by the servers and the client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


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
