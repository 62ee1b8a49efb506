"""A server's stop that hangs says what it waits on (pocketmq.cli.servers.stop_on_signals):
every task's stack, logged STALLED_STOP_S after the signal."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal

import pytest

from pocketmq.cli import servers


async def _waits_forever(never: asyncio.Event) -> None:
    await never.wait()


def test_a_stop_still_running_logs_every_tasks_stack(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(servers, "STALLED_STOP_S", 0.01)
    armed: list[float] = []
    monkeypatch.setattr(faulthandler, "dump_traceback_later", armed.append)

    async def main() -> None:
        stop = servers.stop_on_signals()
        never = asyncio.Event()
        stuck = asyncio.create_task(_waits_forever(never))
        os.kill(os.getpid(), signal.SIGTERM)
        await stop.wait()
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal arms nothing more
        with caplog.at_level(logging.WARNING, logger="pocketmq.cli.servers"):
            async with asyncio.timeout(10):
                while not caplog.records:
                    await asyncio.sleep(0.01)
        stuck.cancel()

    asyncio.run(main())
    (record,) = caplog.records
    assert "still stopping" in record.getMessage()
    assert "_waits_forever" in record.getMessage()
    assert armed == [0.01 * 1.5]
