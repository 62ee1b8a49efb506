"""`make bench`: failover time under automatic failover, kill -9 of the master to the first
successful send through our client, p50 and max over 10 kills.

A NameServer, a ZooKeeper (Debian's package, as the tests use it) and three brokers of one
brokerName (SYNC_MASTER, SYNC_FLUSH, failoverSessionTimeoutMs as given, 2000 by default) run
as processes on loopback. One sync producer (our client, routes polled every 0.5 s) sends
continuously; each round waits for 20 acknowledged sends, SIGKILLs the broker registered as
master, measures the time to the next SEND_OK, restarts the killed broker and waits until it
follows the new master. Prints the figures and the lost count (acknowledged, not consumable at
the end: must be 0). Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration"
sys.path[:0] = [str(_TESTS / "failover"), str(_TESTS)]
from failover_set import (  # noqa: E402
    TOPIC,
    FailoverSet,
    consumable,
    create_topic,
    master_of,
    producer_for,
    runtime_info,
)
from zk_process import ZooKeeperProcess  # noqa: E402

from pocketmq.client import SendStatus, message  # noqa: E402
from pocketmq.client.instance import ClientInstance  # noqa: E402
from pocketmq.errors import PocketMQError  # noqa: E402


async def wait_for(what: str, check: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


async def run(kills: int, session_ms: int, workdir: Path) -> None:
    zk = ZooKeeperProcess(workdir / "zookeeper")
    zk.start()
    fo = FailoverSet(workdir / "brokers", zk.address, conf={"failoverSessionTimeoutMs": session_ms})
    client = ClientInstance("127.0.0.1:1", "fo-bench@1", poll_name_server_interval_s=3600)
    acked: list[tuple[int, float]] = []
    stop = asyncio.Event()
    try:
        masters: list[int] = []

        async def has_master() -> bool:
            m = await master_of(fo, client)
            if m is not None and (not masters or m != masters[-1]):
                masters.append(m)
                return True
            return False

        async def follows(broker_id: int) -> bool:
            info = await runtime_info(client, fo.addr(broker_id))
            return info is not None and info.get("haConnected") == "true"

        await wait_for("the first master", has_master)
        await create_topic(client, fo.addr(masters[-1]))
        producer = producer_for(fo)
        await producer.start()

        async def load() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    result = await producer.send(message(TOPIC, f"m-{n}".encode()))
                except (PocketMQError, ConnectionError, TimeoutError):
                    await asyncio.sleep(0.01)
                    continue
                if result.status is SendStatus.SEND_OK:
                    acked.append((n, time.monotonic()))

        task = asyncio.create_task(load())
        times = []
        for round_no in range(kills):
            base = len(acked)

            async def progressed(base: int = base) -> bool:
                return len(acked) >= base + 20

            await wait_for("20 acknowledged sends", progressed)
            old = masters[-1]
            fo.kill(old)
            killed_at = time.monotonic()

            async def sent_after(killed_at: float = killed_at) -> bool:
                return bool(acked) and acked[-1][1] > killed_at

            await wait_for("a send after the kill", sent_after)
            times.append(next(t for _, t in acked if t > killed_at) - killed_at)
            await wait_for("a new master", has_master)
            fo.start(old)
            await wait_for(f"broker {old} following", lambda old=old: follows(old))
            print(f"kill {round_no + 1}: broker {old} -> {masters[-1]}, {times[-1]:.2f} s")
        stop.set()
        await task
        await producer.shutdown()
        seen = await consumable(client, fo.addr(masters[-1]))
        lost = sum(1 for n, _ in acked if n not in seen)
        ordered = sorted(times)
        print(f"\nfailover time over {kills} kills (session timeout {session_ms} ms): "
              f"p50 {ordered[len(ordered) // 2]:.2f} s, max {ordered[-1]:.2f} s; "
              f"{len(acked)} acknowledged, lost {lost}")  # fmt: skip
    finally:
        await client.close()
        fo.stop()
        zk.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--session-ms", type=int, default=2000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-failover-bench-"))
    try:
        asyncio.run(run(args.kills, args.session_ms, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
