"""A real ZooKeeper for the failover tests: Debian's ``zookeeper`` package (``make test``
installs it), started on a free port in a temp dir and stopped by PID. Tests are skipped, with
the reason, only where the package is missing."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from zk_process import ZK_SERVER, ZooKeeperProcess


def _require_zookeeper() -> None:
    if not ZK_SERVER.exists():
        pytest.skip(
            "ZooKeeper is not installed (Debian package zookeeper; `make test` installs it)"
        )


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper for the session; each test uses its own root path in it."""
    _require_zookeeper()
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper this test alone uses, to stop or kill."""
    _require_zookeeper()
    server = ZooKeeperProcess(tmp_path / "zookeeper")
    try:
        server.start()
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.signal(signal.SIGCONT)
        server.stop()
