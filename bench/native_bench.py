"""`make bench`: pocketmq._speedups against its pure-Python references, in the same run.

Part 1 times each native function and its reference on the inputs the hot path gives them
(an index key "topic#key", a record's properties, the same properties as pulled), best of
several rounds. Part 2 runs `pocketmq store bench` (ASYNC_FLUSH, one writer, KEYS + TAGS +
UNIQ_KEY) once per implementation, alternating, POCKETMQ_PURE_PYTHON=1 selecting the
reference; each line is the median of the rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from pocketmq.protocol import connection, properties
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.remoting import DEFAULT_MAX_FRAME, RemotingCommand

try:
    from pocketmq import _speedups
except ImportError:
    sys.exit("pocketmq._speedups is not built: pip install -e . (needs a C compiler)")

KEY = "TopicTest#ORDER-000123456"
PROPS = {
    "KEYS": "ORDER-000123456",
    "TAGS": "TagA",
    "UNIQ_KEY": "7F00000100012A9F1E2B3C4D5E6F0001",
    "WAIT": "true",
    "MIN_OFFSET": "0",
    "MAX_OFFSET": "123457",
}
TEXT = properties.encode_properties_py(PROPS)
# A producer's 1 KiB single send as it arrives: what RemotingConnection.next_command reads.
SEND_FRAME = bytearray(
    RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "bench-producer", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "1", "f": "0",
         "g": "1732800000000", "h": "0", "i": properties.encode_properties_py(PROPS), "j": "0",
         "k": "false", "m": "false"},
        b"x" * 1024,
    ).encode()
)  # fmt: skip
# (native function, what the input is, its reference, the input)
CASES: list[tuple[str, str, Callable[..., Any], tuple[Any, ...]]] = [
    ("java_string_hash", "index key, 25 chars", properties.java_string_hash_py, (KEY,)),
    ("java_string_hash_concat", "key after a cached 'topic#' hash",
     properties.java_string_hash_concat_py, (-1902610879, "ORDER-1")),
    ("java_string_hash", "non-ASCII key, 12 chars", properties.java_string_hash_py,
     ("订单-0001234😀",)),
    ("encode_properties", "6 properties, 111 chars", properties.encode_properties_py, (PROPS,)),
    ("decode_properties", "the same, as pulled", properties.decode_properties_py, (TEXT,)),
    ("next_frame", "a 1 KiB send's frame in a buffer", connection.next_frame_py,
     (SEND_FRAME, 0, DEFAULT_MAX_FRAME)),
]  # fmt: skip


def ops_per_s(func: Callable[..., Any], args: tuple[Any, ...], number: int = 200_000) -> float:
    best = min(timeit.repeat(lambda: func(*args), number=number, repeat=5))
    return number / best


def micro() -> None:
    print(f"{'function':<24} {'input':<34} {'pure ops/s':>12} {'native ops/s':>13} {'x':>6}")
    for name, what, reference, args in CASES:
        pure = ops_per_s(reference, args)
        fast = ops_per_s(getattr(_speedups, name), args)
        print(f"{name:<24} {what:<34} {pure:>12,.0f} {fast:>13,.0f} {fast / pure:>6.1f}")


def store_bench(base: Path, count: int, pure: bool) -> dict[str, Any]:
    env = dict(os.environ, POCKETMQ_PURE_PYTHON="1" if pure else "0")
    directory = base / ("pure" if pure else "native")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli", "store", "bench", "--dir", str(directory),
             "--count", str(count), "--flush", "async", "--writers", "1", "--json"],
            check=True, capture_output=True, text=True, env=env,
        ).stdout  # fmt: skip
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    result: dict[str, Any] = orjson.loads(out.strip().splitlines()[-1])
    return result


def store(count: int, rounds: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="pocketmq-native-bench-"))
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    try:
        for _ in range(rounds):
            for pure in (False, True):
                runs[pure].append(store_bench(base, count, pure))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nstore bench, ASYNC_FLUSH, 1 writer, {count:,} msgs, median of {rounds}")
    print(f"{'implementation':<16} {'msgs/s':>10} {'raw MB/s':>9} {'ratio':>6}")
    for pure, label in ((True, "pure Python"), (False, "native")):
        rs = runs[pure]
        msgs = statistics.median(r["msgs_per_s"] for r in rs)
        raw = statistics.median(r["raw_mb_per_s"] for r in rs)
        ratio = statistics.median(r["ratio"] for r in rs)
        print(f"{label:<16} {msgs:>10,.0f} {raw:>9.1f} {ratio:>6.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    micro()
    store(args.count, args.rounds)


if __name__ == "__main__":
    main()
