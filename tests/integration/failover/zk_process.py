"""One standalone ZooKeeper server process (Debian's ``zookeeper`` package) on a free port in
a directory of its own, stopped by PID: for the failover tests and bench/failover_bench.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from waiting import wait_until_sync

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
_ATTEMPTS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serves(port: int, data_dir: Path) -> bool:
    """Whether the ZooKeeper on ``port`` serves requests from ``data_dir``: the port may have
    been taken by another server (another test's ZooKeeper) between the probe and the start."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
            conn.sendall(b"conf")
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
    except OSError:
        return False
    return f"dataDir={data_dir}/".encode() in reply


class ZooKeeperProcess:
    """One standalone ZooKeeper server (its JVM is the child: zkServer.sh execs java)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.address = ""
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start on a free port; when the port is taken before ZooKeeper binds it (ZooKeeper
        then exits), again on another."""
        data_dir = self.workdir / "data"
        log_path = self.workdir / "zookeeper.log"
        env = {**os.environ, "JVMFLAGS": f"-Dzookeeper.log.dir={self.workdir} -Xmx128m"}
        for _ in range(_ATTEMPTS):
            self.port = _free_port()
            self.address = f"127.0.0.1:{self.port}"
            # tickTime 200 ms: sessions of 0.4 s to 60 s may be negotiated.
            (self.workdir / "zoo.cfg").write_text(
                f"tickTime=200\ndataDir={data_dir}\nclientPort={self.port}\n"
                "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                "maxSessionTimeout=60000\n4lw.commands.whitelist=conf\n"
            )
            with log_path.open("ab") as log:  # the child keeps its own descriptor
                proc = self.proc = subprocess.Popen(
                    [str(ZK_SERVER), "start-foreground", str(self.workdir / "zoo.cfg")],
                    stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
                )  # fmt: skip
            wait_until_sync(
                lambda p=proc: p.poll() is not None or _serves(self.port, data_dir),
                60, f"ZooKeeper on {self.address}",
            )  # fmt: skip
            if proc.poll() is None:
                return
        raise AssertionError(f"ZooKeeper did not start:\n{log_path.read_text()}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
