"""`make bench`: master/slave replication at the W1 rate, ASYNC_MASTER next to SYNC_MASTER.

For each role a NameServer, a master and its slave (brokerRole=SLAVE, brokerId=1) run as
processes on loopback with temp stores (ASYNC_FLUSH, default segment and batch sizes), and this
process drives the master with W1: ``send_batch`` of 256 bodies of 1 KiB, 4 batches in flight,
into one topic with one queue (created on both brokers). Meanwhile:

- GET_MAX_OFFSET on both brokers every 10 ms says when each batch is in the SLAVE's consume
  queue (readable there); lag ms = that moment - the moment the master's SEND_OK reached the
  producer (to within the 10 ms; negative under SYNC_MASTER, which answers only once the slave
  has acknowledged the bytes), and the lag in bytes (queue units behind x the record size);
- replication throughput = the bytes the slave received / the time from the first send until
  it holds the last message.

Prints one table row per role. Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from server_procs import BrokerPair

from pocketmq.client import Producer, SendStatus, message
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

TOPIC = "BenchHA"
BATCH = 256
IN_FLIGHT = 4


@dataclass(frozen=True, slots=True)
class Row:
    role: str
    produce_msgs_s: float
    produce_mib_s: float
    replicate_mib_s: float
    lag_ms_p50: float
    lag_ms_p99: float
    lag_ms_max: float
    lag_bytes_p50: float
    lag_bytes_max: float


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def invoke(
    client: RemotingClient, addr: str, code: int, fields: dict[str, object]
) -> RemotingCommand:
    resp = await client.invoke(addr, RemotingCommand.request(code, fields), 10)
    if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND):
        raise RuntimeError(f"{code} on {addr}: {resp.code} {resp.remark}")
    return resp


async def max_offset(client: RemotingClient, addr: str) -> int:
    resp = await invoke(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0})
    return int(resp.ext_fields["offset"])


async def record_size(client: RemotingClient, addr: str) -> int:
    """The stored size of the first message of the queue (all are alike)."""
    resp = await invoke(client, addr, RequestCode.PULL_MESSAGE, {
        "consumerGroup": "CG_HA_BENCH", "topic": TOPIC, "queueId": 0, "queueOffset": 1,
        "maxMsgNums": 1, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
        "subscription": "*", "subVersion": 0,
    })  # fmt: skip
    return int.from_bytes(resp.body[:4], "big")


async def run_role(role: str, count: int, workdir: Path) -> Row:
    pair = BrokerPair(workdir, master_conf={"brokerRole": role})
    client = RemotingClient()
    try:
        assert pair.slave is not None
        for broker in (pair.master, pair.slave):
            fields = {"topic": TOPIC, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
            await invoke(client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        acked: dict[int, float] = {}  # the queue offset after a batch -> its SEND_OK
        batches = count // BATCH
        async with Producer("PG_HA_BENCH", pair.namesrv.addr) as producer:
            body = bytes(1024)
            # Wait for the slave to be in sync (a SYNC_MASTER answers SLAVE_NOT_AVAILABLE before).
            probe = [message(TOPIC, body)]
            while (await producer.send_batch(probe)).status is not SendStatus.SEND_OK:
                await asyncio.sleep(0.05)
            base = await max_offset(client, pair.master.addr)
            total = base + batches * BATCH
            arrived: dict[int, float] = {}  # a queue offset -> when the slave had it all
            lag_units: list[int] = []

            async def sample() -> None:
                # The slave's max offset every 10 ms: arrival times to within that.
                slave_has = 0
                while slave_has < total:
                    m = await max_offset(client, pair.master.addr)
                    slave_has = await max_offset(client, pair.slave.addr)
                    arrived.setdefault(slave_has, time.perf_counter())
                    lag_units.append(max(0, m - slave_has))
                    await asyncio.sleep(0.01)

            sampler = asyncio.create_task(sample())
            left = batches
            t0 = time.perf_counter()

            async def sender() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    result = await producer.send_batch([message(TOPIC, body)] * BATCH)
                    assert result.status is SendStatus.SEND_OK, result.status
                    acked[result.queue_offset + BATCH] = time.perf_counter()

            await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))
            t_produced = time.perf_counter() - t0
            await sampler
            t_replicated = arrived[total] - t0
            size = await record_size(client, pair.master.addr)
        seen = sorted(arrived.items())
        # A batch is on the slave at the first sample whose max offset covers its end.
        lags = [(next(t for o, t in seen if o >= end) - at) * 1000 for end, at in acked.items()]
        mib = batches * BATCH * size / (1 << 20)
        lag_bytes = [float(u * size) for u in lag_units]
        return Row(
            role, batches * BATCH / t_produced, mib / t_produced, mib / t_replicated,
            pct(lags, 0.5), pct(lags, 0.99), max(lags), pct(lag_bytes, 0.5), max(lag_bytes),
        )  # fmt: skip
    finally:
        await client.close()
        pair.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=256 * 400, help="messages per role")
    args = parser.parse_args()
    rows = []
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        workdir = Path(tempfile.mkdtemp(prefix=f"pocketmq-ha-{role.lower()}-"))
        try:
            rows.append(await run_role(role, args.count, workdir))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"W1 replication: send_batch of {BATCH} x 1 KiB, {IN_FLIGHT} in flight, "
          f"{args.count} messages per role")  # fmt: skip
    print("| role | produce msgs/s | produce MiB/s | replication MiB/s | lag ms p50 / p99 / max "
          "| lag bytes p50 / max |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.role} | {r.produce_msgs_s:,.0f} | {r.produce_mib_s:.1f} | "
            f"{r.replicate_mib_s:.1f} | {r.lag_ms_p50:.1f} / {r.lag_ms_p99:.1f} / "
            f"{r.lag_ms_max:.1f} | {r.lag_bytes_p50:,.0f} / {r.lag_bytes_max:,.0f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
