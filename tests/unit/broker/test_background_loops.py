"""Background loops outlive one failure: the broker keeps registering with every name server
and persisting each offsets file, the name server keeps expiring silent brokers, the delay,
timer and revive loops keep running, and each failure is logged."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from pocketmq import jsonfile, tasks
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.errors import StoreError
from pocketmq.jsonfile import read_json
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NameServer
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import RemotingCommand


async def until(predicate: Callable[[], bool]) -> None:
    """Let the loop run until predicate holds (the loops under test never really wait)."""
    for _ in range(10_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_register_loop_survives_an_unexpected_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = Broker(BrokerConfig(namesrv_addr="127.0.0.1:1"))
    rounds = 0

    async def flaky() -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 1:
            raise RuntimeError("boom")

    broker.register_all = flaky  # type: ignore[method-assign]
    task = asyncio.create_task(broker._register_loop())
    try:
        await until(lambda: rounds == 1)
        broker.register_soon()
        await until(lambda: rounds == 2)
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert "registration with the name servers failed" in caplog.text
    assert "RuntimeError: boom" in caplog.text


async def test_one_name_server_failing_does_not_skip_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = Broker(BrokerConfig(namesrv_addr="127.0.0.1:1;127.0.0.1:2"))
    broker._register_request = lambda: RemotingCommand(code=103)  # type: ignore[method-assign]
    asked: list[str] = []

    async def invoke(addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        asked.append(addr)
        if addr.endswith(":1"):
            raise ValueError("unexpected")
        return cmd.response(ResponseCode.SUCCESS)

    broker.namesrv_client.invoke = invoke  # type: ignore[method-assign]
    await broker.register_all()
    assert asked == ["127.0.0.1:1", "127.0.0.1:2"]
    assert "cannot register with name server 127.0.0.1:1" in caplog.text


async def test_namesrv_scan_loop_survives_an_unexpected_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    namesrv = NameServer(NamesrvConfig(listen_port=0, scan_not_active_broker_interval=1))
    scans = 0

    def flaky(now_ms: int) -> list[str]:
        nonlocal scans
        scans += 1
        if scans == 1:
            raise RuntimeError("scan boom")
        return []

    namesrv.routes.scan_not_active = flaky  # type: ignore[method-assign]
    task = asyncio.create_task(namesrv._scan_loop())
    try:
        await until(lambda: scans >= 2)
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert "scanning for inactive brokers failed" in caplog.text


async def test_a_due_loop_survives_failing_work(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "RETRY_AFTER_ERROR_MS", 0)
    rounds = 0

    async def flaky() -> int | None:
        nonlocal rounds
        rounds += 1
        if rounds == 1:
            raise RuntimeError("due boom")
        return None

    wake = asyncio.Event()
    task = asyncio.create_task(tasks.run_when_due(flaky, wake))
    try:
        await until(lambda: rounds == 2)
        assert not task.done()
    finally:
        await tasks.cancel_and_wait([task])
    assert "RuntimeError: due boom" in caplog.text


def test_one_offsets_file_failing_does_not_skip_the_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = Broker(BrokerConfig())
    persisted: list[str] = []

    def pop_fails() -> None:
        raise OSError("disk full")

    async def offsets() -> None:
        persisted.append("offsets")

    broker.pop = SimpleNamespace(persist=pop_fails)  # type: ignore[assignment]
    broker.offsets = SimpleNamespace(persist_off_loop=offsets)  # type: ignore[assignment]
    asyncio.run(broker._persist_offsets())
    assert persisted == ["offsets"]
    assert "OSError: disk full" in caplog.text


@pytest.mark.parametrize("cut", [asyncio.CancelledError, StoreError])
def test_a_periodic_offsets_write_cut_short_is_made_by_the_next_persist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: type[BaseException]
) -> None:
    """Cancelled by a stopping broker (whose own last persist follows) or failed: the offsets
    stay to be written, not marked written."""
    offsets = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    offsets.commit("g", "T", 0, 5)

    async def cut_short(path: Path, data: object) -> None:
        raise cut("cut short")

    monkeypatch.setattr(jsonfile, "write_json_atomic_off_loop", cut_short)
    with pytest.raises(cut):
        asyncio.run(offsets.persist_off_loop())
    offsets.persist()
    assert read_json(tmp_path / "consumerOffset.json") == {"offsetTable": {"T@g": {"0": 5}}}
