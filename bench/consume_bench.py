"""The peer harness's W3 shape, native against pure Python in one run: a LitePullConsumer
(pull batches of 32) drains N 1 KiB messages that a producer wrote to a 4-queue topic.

Starts one ``pocketmq serve`` (its implementation chosen by ``--broker-impl``), fills the topic
with ``send_batch`` of 256 (4 in flight, W1's idiom), then runs each consume round in a child
process of its own, so that each child imports pocketmq with or without
``POCKETMQ_PURE_PYTHON=1``; every round uses a fresh consumer group and so reads the whole
topic from its first offset. For each round: msgs/s, the child's CPU (its share of one core)
and the broker's CPU per message. ``--profile DIR`` records py-spy profiles of the client
child and of the broker for every round and prints their top frames. ``--baseline-src DIR``
adds, to every round, a child that imports pocketmq from DIR (the ``src`` of another checkout,
its extension built in place) right after this tree's: the client CPU per message of two
versions, alternating, from the same broker and data. Linux only.

    .venv/bin/python bench/consume_bench.py [--count 200000] [--rounds 2] [--profile DIR]
        [--baseline-src ../main/src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import uvloop

from harness import ServeProcess, process_cpu_s, py_spy
from pocketmq.client import ConsumeFromWhere, LitePullConsumer, Producer, message
from profile_summary import parse, report

TOPIC = "W3Topic"
BATCH = 256
IN_FLIGHT = 4
IMPLEMENTATIONS = {"native": "0", "python": "1"}


async def produce(namesrv: str, count: int, size: int) -> None:
    body = os.urandom(size)
    async with Producer("w3-producer", namesrv) as producer:
        sem = asyncio.Semaphore(IN_FLIGHT)

        async def one(k: int) -> None:
            try:
                await producer.send_batch([message(TOPIC, body) for _ in range(k)])
            finally:
                sem.release()

        tasks = []
        for start in range(0, count, BATCH):
            await sem.acquire()
            tasks.append(asyncio.ensure_future(one(min(BATCH, count - start))))
        await asyncio.gather(*tasks)


async def consume(namesrv: str, group: str, count: int) -> float:
    """Drain ``count`` messages; returns the seconds from the first poll to the last."""
    consumer = LitePullConsumer(
        group, namesrv, pull_batch_size=32,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        got = 0
        t0 = time.perf_counter()
        while got < count:
            msgs = await consumer.poll(5.0)
            if not msgs:
                raise TimeoutError(f"consume stalled at {got}/{count}")
            got += len(msgs)
        return time.perf_counter() - t0
    finally:
        await consumer.shutdown()


def child(args: argparse.Namespace) -> None:
    """One consume round in this process; prints its figures as JSON on stdout."""
    from pocketmq.protocol import native

    profile = Path(args.child_profile) if args.child_profile else None
    with py_spy(os.getpid(), profile):
        cpu0 = time.process_time()
        wall = uvloop.run(consume(args.namesrv, args.group, args.count))
        cpu = time.process_time() - cpu0
    print(orjson.dumps({"impl": native.IMPLEMENTATION, "wall": wall, "cpu": cpu}).decode())


def run_round(
    serve: ServeProcess,
    impl: str,
    group: str,
    count: int,
    profile_dir: Path | None,
    src: Path | None = None,
) -> dict[str, float | str]:
    namesrv = f"127.0.0.1:{serve.ports['namesrv']}"
    command = [sys.executable, __file__, "--child", "--namesrv", namesrv, "--group", group,
               "--count", str(count)]  # fmt: skip
    broker_profile = None
    if profile_dir is not None:
        command += ["--child-profile", str(profile_dir / f"{group}-client.txt")]
        broker_profile = profile_dir / f"{group}-broker.txt"
    env = {**os.environ, "POCKETMQ_PURE_PYTHON": IMPLEMENTATIONS[impl]}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    with py_spy(serve.proc.pid, broker_profile):
        broker0 = process_cpu_s(serve.proc.pid)
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        broker = process_cpu_s(serve.proc.pid) - broker0
    figures = orjson.loads(out.stdout.strip().splitlines()[-1])
    if figures["impl"] != impl:
        raise RuntimeError(f"the {impl} round ran {figures['impl']}")
    return {
        "impl": impl,
        "msgs_s": count / figures["wall"],
        "client_cpu_pct": 100 * figures["cpu"] / figures["wall"],
        "client_us_msg": figures["cpu"] * 1e6 / count,
        "broker_us_msg": broker * 1e6 / count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each implementation")
    parser.add_argument("--impls", default="native,python", help="client implementations")
    parser.add_argument("--broker-impl", choices=sorted(IMPLEMENTATIONS), default="native")
    parser.add_argument("--profile", type=Path, default=None, help="directory for py-spy output")
    parser.add_argument(
        "--baseline-src", type=Path, default=None, help="another pocketmq src to compare with"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--namesrv", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    os.environ["POCKETMQ_PURE_PYTHON"] = IMPLEMENTATIONS[args.broker_impl]
    with tempfile.TemporaryDirectory(prefix="w3-") as tmp:
        serve = ServeProcess(Path(tmp))
        try:
            serve.admin("update-topic", "-t", TOPIC, "-r", "4", "-w", "4")
            namesrv = f"127.0.0.1:{serve.ports['namesrv']}"
            t0 = time.perf_counter()
            uvloop.run(produce(namesrv, args.count, args.size))
            print(f"produced {args.count:,} x {args.size} B in {time.perf_counter() - t0:.1f} s"
                  f" (broker {args.broker_impl})", flush=True)  # fmt: skip
            sources: list[tuple[str, Path | None]] = [("", None)]
            if args.baseline_src is not None:
                sources.append((" baseline", args.baseline_src.resolve()))
            for r in range(args.rounds):
                for impl in args.impls.split(","):
                    for label, src in sources:
                        group = f"w3-{impl}{label.replace(' ', '-')}-{r}"
                        res = run_round(serve, impl, group, args.count, args.profile, src)
                        print(
                            f"{impl:>6}{label} round {r}: {res['msgs_s']:>9,.0f} msgs/s  "
                            f"client CPU {res['client_cpu_pct']:5.1f}% "
                            f"({res['client_us_msg']:.2f} µs/msg)  "
                            f"broker {res['broker_us_msg']:.2f} µs/msg",
                            flush=True,
                        )
                        if args.profile:
                            for side in ("client", "broker"):
                                path = args.profile / f"{group}-{side}.txt"
                                print(f"-- {side} profile, {group}\n{report(parse(path), 10)}")
        finally:
            serve.stop()


if __name__ == "__main__":
    main()
