"""The peer harness (``../shared/bench/peers``) against both implementations of pocketmq.

Runs the harness twice on a copy of its folder in a temp dir (it writes RESULTS.md and
results.json beside itself; the shared folder is never changed): once with the native
extension and Redis Streams, once with ``POCKETMQ_PURE_PYTHON=1`` (pocketmq only; the broker
subprocesses and the harness's client inherit the variable). Prints the two pocketmq runs and
Redis side by side and writes them, with both runs' RESULTS.md, to
``bench/peers-results/peers-<date>.md`` for BENCHMARKS.md to cite.

A clone without the shared folder (anywhere but the benchmark machine) skips with a message.
``REPS`` and ``QUICK`` pass through to the harness; ``REPS`` defaults to 1 here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT.parent / "shared" / "bench" / "peers"
RESULTS_DIR = ROOT / "bench" / "peers-results"

# (label, key in the harness's medians, decimals); higher is better for msgs/s, lower for the rest.
ROWS = [
    ("W1 produce, ASYNC (msgs/s)", "w1_msgs_s", 0),
    ("W1 client CPU %", "w1_client_cpu_pct", 0),
    ("W2 produce, SYNC_FLUSH (msgs/s)", "w2_msgs_s", 0),
    ("W3 consume (msgs/s)", "w3_msgs_s", 0),
    ("W3 client CPU %", "w3_client_cpu_pct", 0),
    ("W4 p50 ms at 2,000 msgs/s", "w4_p50_ms", 2),
    ("W4 p99 ms", "w4_p99_ms", 2),
    ("broker CPU µs/msg, W1", "w1_broker_cpu_s_per_m", 1),
    ("broker CPU µs/msg, W3", "w3_broker_cpu_s_per_m", 1),
    ("broker peak RSS MiB", "peak_rss_mib", 0),
]


def run_harness(systems: str, pure: bool) -> tuple[dict[str, Any], str]:
    """One run_all.sh on a fresh copy of the peers folder: (results.json, RESULTS.md)."""
    with tempfile.TemporaryDirectory(prefix="pocketmq-peers-") as tmp:
        copy = Path(tmp) / "peers"
        shutil.copytree(PEERS, copy)
        for path in copy.iterdir():  # the shared folder is read-only; its copy must not be
            path.chmod(path.stat().st_mode | 0o200)
        copy.chmod(0o755)
        env = {
            **os.environ,
            "SYSTEMS": systems,
            "PHYSICAL": "0",
            "BENCH_PYTHON": sys.executable,
            "REPS": os.environ.get("REPS", "1"),
            "POCKETMQ_PURE_PYTHON": "1" if pure else "0",
        }
        subprocess.run(["bash", str(copy / "run_all.sh")], env=env, check=True)
        results = json.loads((copy / "results.json").read_text())
        return results, (copy / "RESULTS.md").read_text()


def median(results: dict[str, Any], system: str, key: str) -> float | None:
    value = results["systems"].get(system, {}).get("median", {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def side_by_side(native: dict[str, Any], pure: dict[str, Any]) -> list[str]:
    def cell(value: float | None, decimals: int) -> str:
        return "n/a" if value is None else f"{value:,.{decimals}f}"

    lines = [
        "| workload | pocketmq native | pocketmq pure Python | Redis Streams | native / Redis |",
        "|---|---|---|---|---|",
    ]
    for label, key, decimals in ROWS:
        ours = median(native, "pocketmq", key)
        redis = median(native, "redis", key)
        ratio = f"{ours / redis:.2f}" if ours is not None and redis else "n/a"
        lines.append(
            f"| {label} | {cell(ours, decimals)} | {cell(median(pure, 'pocketmq', key), decimals)} "
            f"| {cell(redis, decimals)} | {ratio} |"
        )
    return lines


def demote(markdown: str) -> str:
    """The harness's report two heading levels down, to sit under a ``##`` heading of ours."""
    lines = markdown.splitlines()
    return "\n".join(f"##{line}" if line.startswith("#") else line for line in lines)


def main() -> int:
    if not (PEERS / "run_all.sh").is_file():
        print(f"peer harness skipped: {PEERS} is absent (it exists only on the benchmark machine)")
        return 0
    start = time.monotonic()
    native, native_md = run_harness("pocketmq,redis", pure=False)
    pure, pure_md = run_harness("pocketmq", pure=True)
    table = side_by_side(native, pure)
    meta = native.get("meta", {})
    head = (
        f"Peer harness ({PEERS}), {meta.get('date', '?')}, {meta.get('machine', '?')}, "
        f"{meta.get('reps', '?')} run(s) each, quick={meta.get('quick', False)}; "
        f"both implementations in one `make bench` ({time.monotonic() - start:.0f} s)."
    )
    print("\n" + head + "\n\n" + "\n".join(table))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"peers-{time.strftime('%Y-%m-%d')}.md"
    out.write_text(
        "\n".join(
            [
                "# Peer harness: pocketmq native and pure Python beside Redis Streams",
                "",
                head,
                "",
                *table,
                "",
                "## Native run (RESULTS.md as the harness wrote it)",
                "",
                demote(native_md),
                "## Pure-Python run (POCKETMQ_PURE_PYTHON=1)",
                "",
                demote(pure_md),
            ]
        )
    )
    print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
