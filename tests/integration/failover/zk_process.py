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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
            conn.sendall(b"ruok")
            return conn.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeperProcess:
    """One standalone ZooKeeper server (its JVM is the child: zkServer.sh execs java)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        # tickTime 200 ms: sessions of 0.4 s to 60 s may be negotiated.
        (workdir / "zoo.cfg").write_text(
            f"tickTime=200\ndataDir={workdir / 'data'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
            "4lw.commands.whitelist=ruok\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.workdir / "zookeeper.log", "ab")  # noqa: SIM115 - the child keeps it
        env = {**os.environ, "JVMFLAGS": f"-Dzookeeper.log.dir={self.workdir} -Xmx128m"}
        self.proc = subprocess.Popen(
            [str(ZK_SERVER), "start-foreground", str(self.workdir / "zoo.cfg")],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
        )  # fmt: skip
        log.close()
        wait_until_sync(lambda: _accepts(self.port), 60, f"ZooKeeper on {self.address}")

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
