"""`make bench`: how late delayed and timer messages are delivered, and what a million pending
timers cost.

Runs a broker in this process (no NameServer) on a temp store and measures, on the broker, the
time from a message's due time to the moment its re-put reaches the real topic's consume queue
(when a long-polling consumer is woken):
- delay level 1 (1 s) messages, sent at a steady rate on an otherwise idle broker;
- timer messages (TIMER_DELAY_MS, spread over 1-3 s);
- then --pending timers due in the next hour are appended, the anonymous memory of the process
  and the size of the wheel are read, the broker is restarted on the same store (timing the
  rebuild), and the timer lateness is measured again with all of them pending.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.store.config import StoreConfig

TOPIC = "BenchDelay"
UNIQ = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(name: str, late: list[float]) -> None:
    print(
        f"  {name:<28} n={len(late):<6} p50 {percentile(late, 0.5):7.2f} ms  "
        f"p99 {percentile(late, 0.99):7.2f} ms  max {max(late):7.2f} ms  "
        f"early {sum(1 for x in late if x < 0)}"
    )


class Harness:
    def __init__(self, root: Path) -> None:
        self.config = BrokerConfig(
            listen_port=0, store=StoreConfig(store_path_root_dir=root, message_delay_level="1s")
        )
        self.broker: Broker | None = None
        self.arrived: dict[int, float] = {}  # queue offset in TOPIC -> ms

    async def start(self) -> float:
        t0 = time.perf_counter()
        self.broker = Broker(self.config)
        await self.broker.start()
        elapsed = time.perf_counter() - t0
        store = self.broker.store
        original = store.on_message_arrived
        assert original is not None

        def arrived(topic: str, queue_id: int, queue_offset: int) -> None:
            if topic == TOPIC:
                self.arrived[queue_offset] = time.time() * 1000
            original(topic, queue_id, queue_offset)

        store.on_message_arrived = arrived
        return elapsed

    async def stop(self) -> None:
        assert self.broker is not None
        await self.broker.stop()

    def message(self, body: bytes, **props: str) -> MessageExt:
        assert self.broker is not None
        return MessageExt(
            topic=TOPIC, body=body, properties=dict(props),
            store_host=self.broker.store.commitlog.store_host,
        )  # fmt: skip

    async def send(self, msg: MessageExt) -> MessageExt:
        """Put as the send path does; returns the parked copy (its store time and props)."""
        assert self.broker is not None
        self.broker.timer.rewrite(msg)
        self.broker.schedule.rewrite(msg)
        result = await self.broker.store.put_message(msg)
        assert result.ok, result
        parked = self.broker.store.look_message_by_offset(result.phy_offsets[0])
        assert parked is not None
        return parked

    async def lateness(self, first: int, due_by_id: dict[str, float]) -> list[float]:
        """Wait for len(due_ms) arrivals after the first ``first``, then pair them with their
        due times by message id."""
        deadline = time.monotonic() + max(due_by_id.values()) / 1000 - time.time() + 30
        while len(self.arrived) < first + len(due_by_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert self.broker is not None
        late = []
        cq = self.broker.store.find_consume_queue(TOPIC, 0)
        assert cq is not None
        for qo in sorted(self.arrived)[first:]:
            unit = cq.unit(qo)
            msg = self.broker.store.look_message_by_offset(unit[0]) if unit else None
            if msg is not None and msg.uniq_key in due_by_id:
                late.append(self.arrived[qo] - due_by_id[msg.uniq_key])
        return late


async def delay_phase(h: Harness, count: int, rate: float) -> list[float]:
    first = len(h.arrived)
    due: dict[str, float] = {}
    for i in range(count):
        props = {MessageConst.DELAY_TIME_LEVEL: "1", UNIQ: f"D{i}"}
        msg = h.message(b"d%d" % i, **props)
        parked = await h.send(msg)
        due[f"D{i}"] = parked.store_timestamp + 1000
        await asyncio.sleep(1 / rate)
    return await h.lateness(first, due)


async def timer_phase(h: Harness, count: int, rate: float, tag: str) -> list[float]:
    first = len(h.arrived)
    due: dict[str, float] = {}
    for i in range(count):
        key = f"{tag}{i}"
        props = {MessageConst.TIMER_DELAY_MS: str(random.randint(1000, 3000)), UNIQ: key}
        msg = h.message(b"t%d" % i, **props)
        parked = await h.send(msg)
        due[key] = int(parked.properties[MessageConst.TIMER_OUT_MS])
        await asyncio.sleep(1 / rate)
    return await h.lateness(first, due)


async def pending_phase(h: Harness, pending: int) -> None:
    assert h.broker is not None
    now = int(time.time() * 1000)
    rss0 = rss_anon_mib()
    t0 = time.perf_counter()
    for i in range(pending):
        msg = h.message(b"p", **{MessageConst.TIMER_DELIVER_MS: str(now + 600_000 + i * 3)})
        h.broker.timer.rewrite(msg)
        h.broker.store.append([msg])
        if i % 100_000 == 0 and i:
            print(f"    {i:,} timers appended", file=sys.stderr)
    append_s = time.perf_counter() - t0
    timer = h.broker.timer
    wheel_mib = (
        sum(b.buffer_info()[1] * b.itemsize + 64 for b in timer.buckets.values())
        + sys.getsizeof(timer.buckets)
        + sys.getsizeof(timer._heap)
    ) / 2**20
    print(f"  {pending:,} pending timers appended in {append_s:.1f} s "
          f"({pending / append_s:,.0f}/s); wheel {timer.pending:,} entries, "
          f"{len(timer.buckets):,} buckets, {wheel_mib:.1f} MiB; "
          f"process anonymous memory +{rss_anon_mib() - rss0:.1f} MiB")  # fmt: skip


async def main_async(args: argparse.Namespace, root: Path) -> None:
    h = Harness(root)
    await h.start()
    print("on an idle broker:")
    summary("delay level 1 (1 s)", await delay_phase(h, args.count, args.rate))
    summary("timer (1-3 s)", await timer_phase(h, args.count, args.rate, "A"))
    if args.pending:
        await pending_phase(h, args.pending)
        await h.stop()
        h.arrived.clear()
        rebuild_s = await h.start()
        assert h.broker is not None
        print(f"  restart with them pending: broker ready in {rebuild_s:.1f} s, "
              f"{h.broker.timer.pending:,} timers back in the wheel")  # fmt: skip
        summary("timer, 1M pending", await timer_phase(h, args.count, args.rate, "B"))
    await h.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=500, help="messages per lateness phase")
    parser.add_argument("--rate", type=float, default=200.0, help="sends per second")
    parser.add_argument("--pending", type=int, default=1_000_000, help="0 skips that phase")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="pocketmq-delay-bench-"))
    try:
        asyncio.run(main_async(args, root))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
