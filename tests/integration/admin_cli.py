"""Run `pocketmq admin` for the integration tests: in this process through click's CliRunner
(the CLI's own root group, argument parsing, exit codes and stdout/stderr, without a new
interpreter and its imports for every verb), or as a user runs it, a subprocess
(`python -m pocketmq.cli`), for the end-to-end checks.

Both return a ``subprocess.CompletedProcess`` (returncode, stdout, stderr), so a test reads
either the same way. An exception escaping a verb in this process exits 1 with its traceback
on stderr, as the interpreter would print it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor

from click.testing import CliRunner

from pocketmq.cli.main import cli

# CliRunner swaps sys.stdout/stderr for the whole process while a verb runs: one at a time
# (verbs run in worker threads).
_ONE_AT_A_TIME = threading.Lock()


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``pocketmq admin -n NAMESRV ARGS...`` in this process, output captured.

    The verb runs in a thread of its own (it runs its own event loop, which cannot start in a
    thread that has one running), so it may be called from anywhere; it blocks the caller."""
    argv = ["admin", "-n", namesrv, *args]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_invoke, argv).result()


def _invoke(argv: list[str]) -> subprocess.CompletedProcess[str]:
    with _ONE_AT_A_TIME:
        result = CliRunner().invoke(cli, argv, prog_name="pocketmq")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["pocketmq", *argv], result.exit_code, result.stdout, stderr)


def admin_process(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pocketmq.cli admin -n NAMESRV ARGS...``, a subprocess, output captured."""
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
