"""The SYNC_MASTER + SYNC_FLUSH kill -9 loop with the unmodified C++-based ``rocketmq==0.4.4``
client as the producer (cpp_client_script.py ``load``: sync sends, each message once, the
client's own retries): the master of three brokers under failover SIGKILLed twice under load,
a new master each time, the killed broker restarted to rejoin as a slave; afterwards every
message the client got SEND_OK for is consumable (lost must be 0; duplicates are printed).

The C++ client refreshes a topic's route only every 30 s (MQClientFactory::updateTopicRouteInfo)
or when it has none, so a producer keeps sending to a dead master's address for up to 30 s.
The application here restarts its producer once a new master is elected (one producer process
per master's term, each numbering its messages from its own base), which keeps the test short;
what it checks is the brokers' side: nothing acknowledged is lost across the kills.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from failover_set import (
    TOPIC,
    FailoverSet,
    consumable,
    converged,
    create_topic,
    elected,
    following,
)
from zk_process import ZooKeeperProcess

from pocketmq.client.instance import ClientInstance
from waiting import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop"))
from cpp_driver import SCRIPT, cpp_client_installed

if not cpp_client_installed():
    pytest.skip("rocketmq==0.4.4 is not installed", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.slow]

# Each producer process numbers its messages from its own base, so that numbers stay unique.
TERM_BASE = 1_000_000


class CppProducer:
    """One run of the C++ producer; ``acked`` and ``failed`` are shared by every run."""

    def __init__(self, home: Path, namesrv: str, first: int, acked: list[int]) -> None:
        self.home, self.namesrv, self.first, self.acked = home, namesrv, first, acked
        self.failed = 0
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.home.mkdir(parents=True)
        with open(self.home / "stderr.log", "wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, str(SCRIPT), "load", self.namesrv, str(self.first), TOPIC,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                cwd=self.home, env={**os.environ, "HOME": str(self.home)},
            )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            outcome, number = line.decode().split()
            if outcome == "ok":
                self.acked.append(int(number))
            else:
                self.failed += 1

    async def stop(self) -> None:
        """Close its stdin: it ends after the send under way, and shuts its client down."""
        if self.proc is None or self._reader is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            async with asyncio.timeout(30):
                await self._reader
                await self.proc.wait()
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode == 0, (self.home / "stderr.log").read_text()[-3000:]


@pytest.fixture
async def client() -> AsyncIterator[ClientInstance]:
    instance = ClientInstance("127.0.0.1:1", "fo-cpp-test@1", poll_name_server_interval_s=3600)
    yield instance
    await instance.close()


async def acks(acked: list[int], more: int, timeout_s: float) -> None:
    target = len(acked) + more
    await wait_until(lambda: len(acked) >= target, timeout_s,
                     lambda: f"{more} more SEND_OK (at {len(acked)})")  # fmt: skip


async def test_cpp_producer_kill_loop_loses_no_acknowledged_message(
    tmp_path: Path, zookeeper: ZooKeeperProcess, client: ClientInstance
) -> None:
    fo = FailoverSet(tmp_path, zookeeper.address)
    acked: list[int] = []
    producers: list[CppProducer] = []

    async def new_producer() -> None:
        term = len(producers)
        producer = CppProducer(tmp_path / f"producer{term}", fo.namesrv.addr,
                               term * TERM_BASE + 1, acked)  # fmt: skip
        producers.append(producer)
        await producer.start()

    try:
        master = await elected(fo, client)
        await create_topic(client, fo.addr(master))
        for other in fo.procs:
            if other != master:
                await following(fo, client, other)
        await new_producer()
        for _ in range(2):
            await acks(acked, 50, 30)
            fo.kill(master)  # under load: the producer is sending
            old, master = master, await elected(fo, client, other_than=master)
            await producers[-1].stop()
            await new_producer()
            await acks(acked, 1, 30)
            fo.start(old)
            await following(fo, client, old)
        await acks(acked, 50, 30)
        await producers[-1].stop()
        await converged(fo, client)
        seen = await consumable(client, fo.addr(master))
    finally:
        for producer in producers:
            if producer.proc is not None and producer.proc.returncode is None:
                producer.proc.kill()
                await producer.proc.wait()
        fo.stop()
    lost = [n for n in acked if n not in seen]
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    print(f"\nC++ producer, SYNC_MASTER kill loop: {len(acked)} acknowledged, "
          f"{sum(p.failed for p in producers)} failed, lost {len(lost)}, "
          f"duplicated {duplicated}")  # fmt: skip
    assert lost == []
