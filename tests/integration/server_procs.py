"""Start pocketmq server roles as real subprocesses on 127.0.0.1 with free ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

# tests/, for waiting: this module is also imported outside pytest (the Spark query script).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from waiting import wait_until_sync


class ServerProcess:
    """``python -m pocketmq.cli ROLE --listen 127.0.0.1:0 --ready-file F ...``; for ``serve``,
    pass ``listen=False`` and the port options. The ready file of ``namesrv`` holds its port,
    those of ``broker`` and ``serve`` JSON ports, the broker's in ``port``. Both get a free
    gRPC port unless ``--grpc-port`` is among the options."""

    def __init__(self, role: str, workdir: Path, *args: str, listen: bool = True) -> None:
        self.ready_file = workdir / f"{role}.ready"
        self.log_path = workdir / f"{role}.log"
        self.ready_file.unlink(missing_ok=True)
        if role in ("broker", "serve") and "--grpc-port" not in args:
            args = (*args, "--grpc-port", "0")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmq.cli", role,
             *(["--listen", "127.0.0.1:0"] if listen else []),
             "--ready-file", str(self.ready_file), *args],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir,
            env={**os.environ, "HOME": str(workdir)},
        )  # fmt: skip
        self.ready = self._wait_ready(30)
        self.port = self.ready if isinstance(self.ready, int) else self.ready.get("broker", 0)
        self.addr = f"127.0.0.1:{self.port}"

    def _wait_ready(self, timeout_s: float) -> Any:
        try:
            wait_until_sync(
                lambda: self.ready_file.exists() or self.proc.poll() is not None,
                timeout_s, "its ready file", interval_s=0.02,
            )  # fmt: skip
            if self.ready_file.exists():
                return json.loads(self.ready_file.read_text())
            raise AssertionError(f"it exited with {self.proc.returncode}")
        except AssertionError as exc:
            self.proc.kill()
            raise AssertionError(
                f"server did not become ready ({exc}):\n{self.log_path.read_text()}"
            ) from None

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
