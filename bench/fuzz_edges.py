"""Fuzz the protocol edges at scale: 10^6 inputs (by default) across the remoting codec, the
broker's remoting handlers and the gRPC servicer, with the generators of tests/fuzz/fuzz_inputs.py
driven by a seeded PRNG and the properties of tests/fuzz/fuzz_targets.py (the test suite runs
both under Hypothesis, a few hundred inputs each: Hypothesis's engine manages only a few hundred
of these structured inputs per second here, too few for 10^6).

Prints each target's inputs per second, then every distinct finding (an exception or a broken
property, keyed by where it happened) with how often it occurred, the first input that caused
it (and its index, to replay it with --replay) and its traceback. Findings do not stop the run;
the exit status is 1 when there are any.

    python bench/fuzz_edges.py [--inputs 1000000] [--seed 0] [--targets codec,remoting,grpc]
    python bench/fuzz_edges.py --seed 0 --targets remoting --replay 1234
"""

from __future__ import annotations

import argparse
import functools
import logging
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fuzz"))
from fuzz_inputs import (  # found through the path above
    RandomSource,
    Source,
    codec_input,
    grpc_call,
    remoting_request,
)
from fuzz_targets import BrokerHarness, codec_target

# Shares of the inputs: the codec is cheap, a broker request costs a store write at times.
SHARES = {"codec": 0.6, "remoting": 0.3, "grpc": 0.1}
# An input taking longer than this is reported as a hang (the brokers also time out at 5 s).
SLOW_S = 1.0


@dataclass
class Finding:
    count: int
    first_index: int
    first_input: str
    trace: str


@dataclass
class Findings:
    table: dict[tuple[str, str, str], Finding] = field(default_factory=dict)

    def record(self, target: str, index: int, value: Any, exc: BaseException) -> None:
        frames = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in frames if "pocketmq" in f.filename or "fuzz_targets" in f.filename]
        where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
        what = type(exc).__name__
        if isinstance(exc, AssertionError):  # one finding per message, whatever the values
            what += ": " + re.sub(r"-?\d+", "_", str(exc).split(":")[0])[:100]
        key = (target, what, where)
        if key in self.table:
            self.table[key].count += 1
        else:
            trace = "".join(traceback.format_exception(exc)[-6:])
            self.table[key] = Finding(1, index, repr(value)[:600], trace)


def source(seed: int, index: int) -> Source:
    """The choices of input ``index``: each input has its own PRNG, so any one replays alone."""
    return RandomSource(random.Random(seed * 1_000_000_007 + index))


def run(target: str, indexes: range, seed: int, findings: Findings, root: Path) -> float:
    """Fuzz one target; a broker left broken by an input (a blocked event loop) is replaced."""
    harness = None if target == "codec" else BrokerHarness(Path(tempfile.mkdtemp(dir=root)))
    make, check = plan(target, harness)
    start = time.perf_counter()
    try:
        for index in indexes:
            value = make(source(seed, index))
            t0 = time.perf_counter()
            try:
                check(value)
                if time.perf_counter() - t0 > SLOW_S:
                    raise TimeoutError(f"took over {SLOW_S} s")
            except Exception as exc:  # every finding is kept, none stops the run
                findings.record(target, index, value, exc)
            if harness is not None and harness.broken:
                harness.close()
                shutil.rmtree(harness.broker.store.config.root, ignore_errors=True)
                harness = BrokerHarness(Path(tempfile.mkdtemp(dir=root)))
                make, check = plan(target, harness)
    finally:
        if harness is not None:
            try:
                harness.close()
            except Exception as exc:  # reported with the rest, not instead of it
                findings.record(target, -1, "stopping the broker", exc)
    return time.perf_counter() - start


def plan(
    target: str, harness: BrokerHarness | None
) -> tuple[Callable[[Source], Any], Callable[[Any], None]]:
    """How a target makes its inputs and checks one."""
    if target == "codec":
        return codec_input, lambda case: codec_target(*case)
    assert harness is not None
    if target == "remoting":
        codes = sorted(harness.broker.dispatcher.handlers)
        return functools.partial(remoting_request, codes=codes), harness.remoting_target
    return grpc_call, harness.grpc_target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="in total")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default=",".join(SHARES))
    parser.add_argument("--replay", type=int, help="run only this input of each target")
    args = parser.parse_args()
    # The harness keeps the exceptions the broker logs; printed, they would hide the report.
    pocketmq_log = logging.getLogger("pocketmq")
    pocketmq_log.propagate = False
    pocketmq_log.addHandler(logging.NullHandler())  # else Python's last resort prints them
    # A broker left blocked is abandoned with its tasks pending; asyncio would list each one.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    targets = [t for t in args.targets.split(",") if t]
    total_share = sum(SHARES[t] for t in targets)
    findings = Findings()
    print(f"fuzzing {args.inputs} inputs (seed {args.seed}): {', '.join(targets)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-edges-") as tmp:
        for target in targets:
            n = round(args.inputs * SHARES[target] / total_share)
            indexes = range(n) if args.replay is None else range(args.replay, args.replay + 1)
            seconds = run(target, indexes, args.seed, findings, Path(tmp))
            print(
                f"{target:>9}: {len(indexes):>9} inputs in {seconds:8.1f} s = "
                f"{len(indexes) / seconds:8.0f} inputs/s", flush=True,
            )  # fmt: skip
    print(f"findings: {len(findings.table)}")
    for (target, what, where), f in sorted(findings.table.items()):
        print(f"\n[{target}] {what} at {where} ({f.count}x, first: --replay {f.first_index})")
        print(f"  input: {f.first_input}")
        print("  " + f.trace.replace("\n", "\n  ").rstrip())
    return 1 if findings.table else 0


if __name__ == "__main__":
    sys.exit(main())
