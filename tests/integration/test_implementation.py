"""A broker subprocess runs the implementation the suite runs under: CI runs the integration
tests a second time with POCKETMQ_PURE_PYTHON=1, which reaches the brokers only if nothing
between the test and the process scrubs the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import native

pytestmark = pytest.mark.integration


def test_a_broker_subprocess_runs_the_implementation_of_the_suite(tmp_path: Path) -> None:
    forced_pure = os.environ.get(native.PURE_PYTHON_ENV, "") not in ("", "0")
    expected = "pure Python (POCKETMQ_PURE_PYTHON=1)" if forced_pure else native.DESCRIPTION
    assert expected == native.DESCRIPTION

    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        log = proc.log_path.read_text()  # the startup line is written before the ready file
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()
    assert f"hot path {expected}\n" in log

    version = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "--version"],
        capture_output=True, text=True, check=True, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert version.stdout.strip().endswith(f", {expected}")
