"""The example pipelines in examples/spark run end to end against a live broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_helpers import Serve

pytestmark = [pytest.mark.slow, pytest.mark.integration]

EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "spark"


def run_example(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    return proc.stdout


def test_dead_letter_audit(serve: Serve) -> None:
    out = run_example("dlq_audit.py", "--demo", "--nameserver", serve.nameserver)
    lines = [line.replace(" ", "") for line in out.splitlines()]
    assert "|payment-service|payments|rejectedwithoutretry|3|" in "".join(lines), out
    assert "|payment-service|payments|retriesexhaustedafter1|2|" in "".join(lines), out


def test_order_pipeline(serve: Serve, tmp_path: Path) -> None:
    out = run_example(
        "order_pipeline.py", "--generate", "600", "--nameserver", serve.nameserver,
        "--out", str(tmp_path),
    )  # fmt: skip
    windows = [line for line in out.splitlines() if line.strip().endswith(tuple("0123456789"))]
    assert "sent 600 orders" in out
    assert "closed windows so far:" in out, out
    assert len([w for w in windows if "orders" in w]) >= 5, out
    assert (tmp_path / "order_stats_parquet").is_dir()
