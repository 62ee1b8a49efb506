"""Start pocketmq server roles as real subprocesses on 127.0.0.1 with free ports."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
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
        """SIGTERM and wait; returns the exit code. A server still running 20 s later is killed
        and reported with the end of its log, where it wrote what its stop waits on."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                tail = self.log_path.read_text(errors="replace")[-20_000:]
                raise AssertionError(
                    f"{self.addr} did not exit within 20 s of SIGTERM; its log ends:\n{tail}"
                ) from None
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()


def start_each(
    names: Iterable[str], start: Callable[[str], ServerProcess],
    started: dict[str, ServerProcess], stop: Callable[[], None],
) -> None:  # fmt: skip
    """``started[name] = start(name)`` for each name; when one fails, ``stop()`` (which stops
    what ``started`` holds) before the error goes on: what started must not outlive a failed
    setup."""
    try:
        for name in names:
            started[name] = start(name)
    except BaseException:
        stop()
        raise


def broker_with_conf(
    home: Path, namesrv: str, conf: dict[str, str | int], listen: str = "127.0.0.1:0"
) -> ServerProcess:
    """A broker process whose broker.conf (in ``home``, store in ``home/store``) holds
    ``conf`` with RocketMQ's keys; a store already there is reused."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "broker.conf"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return ServerProcess(
        "broker", home, "-c", str(path), "--store", str(home / "store"), "--listen", listen,
        "-n", namesrv, listen=False,
    )  # fmt: skip


class BrokerPair:
    """A NameServer, a master (brokerId 0) and its slave (same brokerName, brokerRole=SLAVE,
    brokerId 1) as processes under ``workdir``; the slave learns the master's HA address from
    the NameServer. ``conf`` goes to both brokers, ``master_conf`` / ``slave_conf`` to one."""

    def __init__(
        self,
        workdir: Path,
        conf: dict[str, str | int] | None = None,
        master_conf: dict[str, str | int] | None = None,
        slave_conf: dict[str, str | int] | None = None,
    ) -> None:
        self.workdir = workdir
        (workdir / "namesrv").mkdir(parents=True, exist_ok=True)
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        common: dict[str, str | int] = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-ha", **(conf or {}),
        }  # fmt: skip
        self.master_conf = {**common, "brokerId": 0, **(master_conf or {})}
        self.slave_conf = {
            **common, "brokerId": 1, "brokerRole": "SLAVE", **(slave_conf or {}),
        }  # fmt: skip
        self.master = self.start_master()
        self.slave: ServerProcess | None = self.start_slave()

    def start_master(self) -> ServerProcess:
        self.master = broker_with_conf(self.workdir / "master", self.namesrv.addr,
                                       self.master_conf)  # fmt: skip
        return self.master

    def start_slave(self) -> ServerProcess:
        self.slave = broker_with_conf(self.workdir / "slave", self.namesrv.addr, self.slave_conf)
        return self.slave

    def store(self, role: str) -> Path:
        return self.workdir / role / "store"

    def stop(self) -> list[int]:
        """Stop every process still running; returns the brokers' exit codes."""
        codes = [p.stop() for p in (self.slave, self.master) if p is not None]
        self.namesrv.stop()
        return codes


# Segments are compared a slice at a time: a CommitLog segment is 1 GiB by default.
_SLICE = 1 << 24


def _data_end(path: Path) -> int:
    """One past the file's last nonzero byte (0: all zeros). Only the file's data extents are
    read (SEEK_DATA/SEEK_HOLE), last first: a segment is sparse, and its holes read as zeros."""
    extents = []
    with path.open("rb") as f:
        fd, pos = f.fileno(), 0
        while True:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no data at or after pos
                    raise
                break
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            extents.append((start, pos))
        for start, end in reversed(extents):
            while end > start:
                begin = max(start, end - _SLICE)
                f.seek(begin)
                kept = len(f.read(end - begin).rstrip(b"\0"))
                if kept:
                    return begin + kept
                end = begin
    return 0


def _same_head(a: Path, b: Path, length: int) -> bool:
    """Whether both files hold the same first ``length`` bytes."""
    with a.open("rb") as fa, b.open("rb") as fb:
        while length > 0:
            mine = fa.read(min(length, _SLICE))
            if not mine or mine != fb.read(len(mine)):
                return False
            length -= len(mine)
    return True


def _same_file(a: Path, b: Path) -> bool:
    end = _data_end(a)
    return a.stat().st_size == b.stat().st_size and _data_end(b) == end and _same_head(a, b, end)


def commitlog_segments(store: Path) -> list[Path]:
    """A store's CommitLog segments holding data, oldest first (a segment made ahead of the
    writer, all zeros, is left out)."""
    paths = sorted((store / "commitlog").iterdir())
    while paths and not _data_end(paths[-1]):
        paths.pop()
    return paths


def commitlog_is_prefix(slave: Path, master: Path) -> bool:
    """Whether the slave's CommitLog equals the master's byte for byte from the slave's
    first segment on, up to where the slave's data ends (the master may hold more)."""
    mine = commitlog_segments(slave)
    theirs = {p.name: p for p in commitlog_segments(master)}
    if not mine or any(p.name not in theirs for p in mine):
        return False
    if not all(_same_file(p, theirs[p.name]) for p in mine[:-1]):
        return False
    return _same_head(mine[-1], theirs[mine[-1].name], _data_end(mine[-1]))


def commitlog_equal(slave: Path, master: Path) -> bool:
    """The slave holds the master's whole CommitLog from its first segment on."""
    mine = commitlog_segments(slave)
    theirs = commitlog_segments(master)
    names = [p.name for p in mine]
    return (
        bool(mine)
        and names == [p.name for p in theirs][-len(mine) :]
        and all(_same_file(a, b) for a, b in zip(mine, theirs[-len(mine) :], strict=True))
    )
