"""`make bench`: transactional sends next to plain ones, and how late the broker's check-back
comes.

Starts ``pocketmq serve`` (ASYNC_FLUSH, temp store, free loopback ports) with a broker.conf
setting ``transactionTimeOut`` and ``transactionCheckInterval`` (1000 ms each by default), and
drives it from this process (uvloop) with ONE ``TransactionProducer`` and 1 KiB bodies:

  plain c=N   ``Producer.send`` of that producer from N tasks: the reference
  tx c=N      ``send_message_in_transaction`` from N tasks, an ``async def`` listener answering
              COMMIT_MESSAGE; latency is the whole call (half sent and stored, local
              transaction, one-way END_TRANSACTION written); the phase ends once the broker
              holds every committed message in the real topic's consume queues
  check-back  K halves left UNKNOW, sent evenly over --spread-s so that their due times fall
              all over the check interval; the check listener answers COMMIT_MESSAGE and notes
              when each check arrives; a PushConsumer started before waits for the K

Throughput phases report msgs/s, latency percentiles and the CPU seconds the broker process
(utime + stime from /proc/<pid>/stat) and this process spent per 1,000 messages. The
check-back reports lateness = check arrival - (half born time + transactionTimeOut): the
broker checks every transactionCheckInterval, so a check comes at most about one interval
after the half's timeout (plus the round's own time and the trip to the producer). Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from harness import (
    Meter,
    PhaseResult,
    ServeProcess,
    add_send_arguments,
    fmt_result,
    percentile,
    py_spy,
    timed_calls,
)
from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    PushConsumer,
    SendStatus,
    TransactionProducer,
    message,
)
from pocketmq.protocol.codes import RequestCode
from profile_summary import parse, report

PLAIN_TOPIC = "BenchTxPlain"
TX_TOPIC = "BenchTx"
CHECK_TOPIC = "BenchTxCheck"
GROUP = "bench_tx_producer"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
WARMUP = 500  # sends of each kind before the first phase: connections, routes, topics
COMMIT_TIMEOUT_S = 30.0  # for the broker to show every committed message of a phase


class Listener:
    """The application's side: a local transaction answers what the send's ``arg`` says; a
    check notes its arrival (epoch ms, the clock of born times) and answers COMMIT."""

    def __init__(self) -> None:
        self.checked_ms: dict[str, float] = {}  # transaction id -> first check's arrival
        self.born_ms: dict[str, int] = {}  # transaction id -> half born time
        self.checks: Counter[str] = Counter()

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        assert isinstance(arg, LocalTransactionState)
        return arg

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        now_ms = time.time() * 1000
        key = msg.uniq_key or msg.msg_id
        self.checks[key] += 1
        self.checked_ms.setdefault(key, now_ms)
        self.born_ms.setdefault(key, msg.born_timestamp)
        return COMMIT


class Bench:
    def __init__(self, workdir: Path, args: argparse.Namespace) -> None:
        self.args = args
        conf = workdir / "broker.conf"
        conf.write_text(
            f"transactionTimeOut={args.timeout_ms}\ntransactionCheckInterval={args.interval_ms}\n"
        )
        self.serve = ServeProcess(workdir, "-c", str(conf))
        self.pid = self.serve.proc.pid
        self.namesrv = f"127.0.0.1:{self.serve.ports['namesrv']}"
        self.listener = Listener()
        self.producer = TransactionProducer(GROUP, self.namesrv, listener=self.listener)
        self.body = os.urandom(args.size)

    async def plain(self) -> None:
        await self.producer.send(message(PLAIN_TOPIC, self.body, tags="bench"))

    async def tx(self) -> None:
        msg = message(TX_TOPIC, self.body, tags="bench")
        result = await self.producer.send_message_in_transaction(msg, COMMIT)
        if result.status is not SendStatus.SEND_OK or result.local_transaction_state is not COMMIT:
            raise RuntimeError(f"transactional send ended {result}")

    async def stored(self, topic: str) -> int:
        """How many messages the broker holds in ``topic``'s consume queues."""
        instance = self.producer.instance
        total = 0
        # The producer's queues of the topic: an auto-created topic reads the queues it writes.
        for mq in await self.producer.fetch_publish_queues(topic):
            addr = instance.master_addr(mq.broker_name)
            assert addr is not None, mq
            fields = {"topic": topic, "queueId": mq.queue_id}
            resp = await instance.invoke(addr, RequestCode.GET_MAX_OFFSET, fields)
            total += int(resp.ext_fields["offset"])
        return total

    async def throughput_phase(
        self, call: Callable[[], Awaitable[None]], topic: str, concurrency: int
    ) -> PhaseResult:
        count = self.args.count
        want = await self.stored(topic) + count
        meter = Meter(self.pid)
        latencies_ms = await timed_calls(call, count, concurrency)
        # END_TRANSACTION is one-way: the phase is over once the broker has applied them all.
        deadline = time.monotonic() + COMMIT_TIMEOUT_S
        while (have := await self.stored(topic)) < want and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return meter.result(count, latencies_ms, lost=want - have)

    async def check_phase(self) -> CheckResult:
        k, spread_s = self.args.checks, self.args.spread_s
        consumed_ms: dict[str, float] = {}
        deliveries = 0
        all_consumed = asyncio.Event()

        async def on_messages(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            nonlocal deliveries
            now_ms = time.time() * 1000
            deliveries += len(msgs)
            for m in msgs:
                consumed_ms.setdefault(m.uniq_key or m.msg_id, now_ms)
            if len(consumed_ms) >= k:
                all_consumed.set()
            return ConsumeResult.CONSUME_SUCCESS

        consumer = PushConsumer(
            "bench_tx_check", self.namesrv, listener=on_messages,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval_s=1.0,
        )  # fmt: skip
        consumer.subscribe(CHECK_TOPIC, "*")
        async with consumer:
            ids: set[str] = set()
            start = time.perf_counter()
            for i in range(k):
                delay = start + i * spread_s / k - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                msg = message(CHECK_TOPIC, self.body, tags="bench")
                result = await self.producer.send_message_in_transaction(msg, UNKNOW)
                ids.add(result.transaction_id)
            sent_s = time.perf_counter() - start
            wait_s = spread_s + (self.args.timeout_ms + 3 * self.args.interval_ms) / 1000 + 10
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await all_consumed.wait()
            all_s = time.perf_counter() - start
        checked = {t: at for t, at in self.listener.checked_ms.items() if t in ids}
        late = [at - self.listener.born_ms[t] - self.args.timeout_ms for t, at in checked.items()]
        last_due = max((self.listener.born_ms[t] for t in checked), default=0)
        last_due += self.args.timeout_ms
        return CheckResult(
            sent=k,
            sent_s=sent_s,
            checked=len(checked),
            extra_checks=sum(self.listener.checks[t] for t in checked) - len(checked),
            stray_checks=sum(n for t, n in self.listener.checks.items() if t not in ids),
            consumed=sum(1 for t in consumed_ms if t in ids),
            foreign=sum(1 for t in consumed_ms if t not in ids),
            duplicates=deliveries - len(consumed_ms),
            lateness_ms=sorted(late),
            all_consumed_s=all_s if all_consumed.is_set() else None,
            after_last_due_ms=max(consumed_ms.values()) - last_due if checked else None,
            check_to_consumed_ms=sorted(
                consumed_ms[t] - at for t, at in checked.items() if t in consumed_ms
            ),
        )

    async def run(self) -> tuple[dict[str, PhaseResult], CheckResult]:
        args = self.args
        results: dict[str, PhaseResult] = {}

        async def phase(name: str, run: Callable[[], Awaitable[PhaseResult]]) -> None:
            out = args.profile / f"{name.replace(' ', '_')}.txt" if args.profile else None
            with py_spy(self.pid, out):
                results[name] = await run()
            print(f"  {name:<11} {fmt_result(results[name])}", flush=True)

        await self.producer.start()
        try:
            # Created ahead so that the check-back's consumer finds its route at once.
            self.serve.admin("update-topic", "-t", CHECK_TOPIC)
            await asyncio.gather(*(self.plain() for _ in range(WARMUP)))
            await asyncio.gather(*(self.tx() for _ in range(WARMUP)))
            for c in args.concurrency:
                plain = functools.partial(self.throughput_phase, self.plain, PLAIN_TOPIC, c)
                await phase(f"plain c={c}", plain)
                await phase(
                    f"tx c={c}", functools.partial(self.throughput_phase, self.tx, TX_TOPIC, c)
                )
            check = await self.check_phase()
            print(f"  check-back  {check.describe()}", flush=True)
        finally:
            await self.producer.shutdown()
        return results, check

    def stop(self) -> None:
        code = self.serve.stop()
        if code != 0:
            print(f"pocketmq serve exited with {code}; its log:\n{self.serve.log_path.read_text()}")


@dataclass(frozen=True, slots=True)
class CheckResult:
    sent: int
    sent_s: float
    checked: int
    extra_checks: int  # checks beyond the first of a transaction: none expected
    stray_checks: int  # checks of the throughput phases' halves: none expected
    consumed: int
    foreign: int  # consumed messages that are none of the K: none expected
    duplicates: int  # deliveries beyond the first of a message: none expected
    lateness_ms: list[float]  # ascending
    all_consumed_s: float | None  # from the first half sent; None: not all within the wait
    after_last_due_ms: float | None  # last consumed - (last half born + timeout)
    check_to_consumed_ms: list[float]  # ascending

    def describe(self) -> str:
        late = self.lateness_ms
        return (
            f"{self.checked}/{self.sent} checked, {self.consumed} consumed, "
            f"{self.extra_checks} extra checks, {self.stray_checks} stray, {self.foreign} "
            f"foreign, {self.duplicates} duplicates; lateness p50 "
            f"{percentile(late, 0.5):.0f} p99 {percentile(late, 0.99):.0f} max "
            f"{late[-1] if late else float('nan'):.0f} ms, early {sum(x < 0 for x in late)}"
        )


def print_tables(
    results: dict[str, PhaseResult], check: CheckResult, args: argparse.Namespace
) -> None:
    print(
        "\n| phase | msgs/s | p50 ms | p99 ms | max ms | broker CPU s / 1,000 msgs "
        "| client CPU s / 1,000 msgs | lost |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r.msgs_per_s:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.max_ms:.2f} "
            f"| {r.server_cpu_us_per_msg / 1000:.3f} | {r.client_cpu_us_per_msg / 1000:.3f} "
            f"| {r.lost} |"
        )
    for c in args.concurrency:
        tx, plain = results[f"tx c={c}"], results[f"plain c={c}"]
        print(
            f"| tx / plain, c={c} | {tx.msgs_per_s / plain.msgs_per_s:.2f} "
            f"| {(tx.p50_ms or 0) / (plain.p50_ms or 1):.2f} "
            f"| {(tx.p99_ms or 0) / (plain.p99_ms or 1):.2f} | "
            f"| {tx.server_cpu_us_per_msg / plain.server_cpu_us_per_msg:.2f} "
            f"| {tx.client_cpu_us_per_msg / plain.client_cpu_us_per_msg:.2f} | |"
        )
    late = check.lateness_ms
    c2c = check.check_to_consumed_ms
    all_s = f"{check.all_consumed_s:.2f} s" if check.all_consumed_s is not None else "NOT ALL"
    after = f"{check.after_last_due_ms:.0f} ms" if check.after_last_due_ms is not None else "-"
    print(
        f"\ncheck-back: {check.sent} halves left UNKNOW over {check.sent_s:.2f} s, "
        f"transactionTimeOut {args.timeout_ms} ms, transactionCheckInterval "
        f"{args.interval_ms} ms\n"
    )
    print("| figure | value |\n|---|---|")
    print(f"| checked / consumed (of {check.sent}) | {check.checked} / {check.consumed} |")
    print(
        f"| extra checks, checks of throughput halves, foreign and duplicate deliveries "
        f"| {check.extra_checks}, {check.stray_checks}, {check.foreign}, {check.duplicates} |"
    )
    print(
        f"| lateness p50 / p99 / max | {percentile(late, 0.5):.0f} / "
        f"{percentile(late, 0.99):.0f} / {late[-1] if late else float('nan'):.0f} ms |"
    )
    print(f"| checks before the timeout (early) | {sum(x < 0 for x in late)} |")
    print(
        f"| bound: one check interval | {args.interval_ms} ms "
        f"(p99 / bound = {percentile(late, 0.99) / args.interval_ms:.2f}) |"
    )
    print(
        f"| check arrival to consumed p50 / p99 | {percentile(c2c, 0.5):.1f} / "
        f"{percentile(c2c, 0.99):.1f} ms |"
    )
    print(f"| all {check.sent} consumed, from the first half sent | {all_s} |")
    print(f"| last consumed after the last half's due time | {after} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_send_arguments(parser)
    parser.add_argument("--checks", type=int, default=200, help="halves left to the check-back")
    parser.add_argument(
        "--spread-s", type=float, default=2.0, help="seconds over which those halves are sent"
    )
    parser.add_argument("--timeout-ms", type=int, default=1000, help="transactionTimeOut")
    parser.add_argument("--interval-ms", type=int, default=1000, help="transactionCheckInterval")
    parser.add_argument(
        "--profile", type=Path, default=None, help="directory for py-spy profiles of the broker"
    )
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-tx-bench-"))
    try:
        bench = Bench(workdir, args)
        print(f"pocketmq serve pid {bench.pid}", flush=True)
        try:
            results, check = uvloop.run(bench.run())
        finally:
            bench.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print_tables(results, check, args)
    failures = [
        f"{name}: {r.lost} committed messages missing" for name, r in results.items() if r.lost
    ]
    if check.checked < check.sent or check.consumed < check.sent:
        failures.append(f"check-back: {check.checked} checked, {check.consumed} consumed")
    if check.foreign or check.duplicates:
        failures.append(f"check-back: {check.foreign} foreign, {check.duplicates} duplicates")
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            print(f"\n== {path.name}\n{report(parse(path), 8)}")
    if failures:
        sys.exit("FAILED: " + "; ".join(failures))


if __name__ == "__main__":
    main()
