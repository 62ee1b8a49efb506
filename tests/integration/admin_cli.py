"""Run `pocketmq admin` as a user runs it (a subprocess), for the integration tests."""

from __future__ import annotations

import subprocess
import sys


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pocketmq.cli admin -n NAMESRV ARGS...``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def ok(namesrv: str, *args: str) -> str:
    """The verb's stdout; fails the test unless it exited 0 without a traceback."""
    out = admin(namesrv, *args)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout
