"""pocketmq.testing used as a user would: a test suite of their own (suite/, copied out of this
repository and run by a pytest of its own, which finds the fixtures through the installed
``pytest11`` entry point), a program using the async context manager outside pytest, and what
happens when the server cannot start, is killed, or outlives the process that started it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.testing import PocketMQServer, ServerError, ServerExitError, ServerStartError, server
from waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
README = HERE.parent.parent / "README.md"
# What the plugin may load beyond pytest itself: it is loaded in every pytest run.
PLUGIN_MODULES = {"pocketmq", "pocketmq.testing", "pocketmq.testing.plugin"}


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def run_python(*args: str, cwd: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
        env={**os.environ, "HOME": str(cwd)},  # the 5.x client writes its logs under $HOME
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.skipif(importlib.util.find_spec("rocketmq") is None, reason="no 5.x client")
def test_a_users_suite_runs_with_the_installed_plugin(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(HERE / "suite", project)
    base = tmp_path / "basetemp"
    done = run_python(
        "-m", "pytest", "-v", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--basetemp", str(base), cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout, done.stdout
    assert "plugins:" in done.stdout and "pocketmq-" in done.stdout  # through the entry point
    assert not list(base.glob("pocketmq-*")), "a server's directory was left behind"


def test_the_readme_examples_are_the_suites_tests() -> None:
    readme = README.read_text()
    for name in ("test_official_client.py", "test_pocketmq_client.py"):
        assert (HERE / "suite" / name).read_text() in readme, f"README lost suite/{name}"


def test_the_plugin_is_registered_and_loads_nothing_heavy(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    assert request.config.pluginmanager.get_plugin("pocketmq") is not None
    probe = (
        "import json, sys; import pytest; before = set(sys.modules); "
        "import pocketmq.testing.plugin; print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = run_python("-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) <= PLUGIN_MODULES


def test_the_async_context_manager_outside_pytest(tmp_path: Path) -> None:
    done = run_python(str(HERE / "async_script.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bodies"] == ["order-1"]
    assert gone(result["pid"])
    assert not Path(result["workdir"]).exists()


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    server = PocketMQServer(broker_conf={"flushDiskType": "BOGUS"}, parent_dir=tmp_path)
    with pytest.raises(ServerStartError, match="exited with code 2") as info:
        server.start()
    assert "flush_disk_type: cannot use 'BOGUS'" in str(info.value)  # the log's tail
    assert list(tmp_path.iterdir()) == []


def test_a_server_with_acl_enabled_starts_and_refuses_unsigned_admin(tmp_path: Path) -> None:
    # Readiness takes any answer from the broker: with ACL on it refuses unsigned requests.
    acl = PocketMQServer(broker_conf={"aclEnable": "true"}, parent_dir=tmp_path)
    with acl, pytest.raises(ServerError, match=r"creating topic T failed: code \d+"):
        acl.create_topic("T")


def test_an_acl_server_takes_topics_and_groups_from_an_admin_account(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(
        "accounts:\n  - accessKey: TestAdmin01\n    secretKey: admin-secret\n    admin: true\n"
    )
    admin = SessionCredentials("TestAdmin01", "admin-secret")
    conf = {"aclEnable": "true", "aclPlainFile": str(acl_file)}
    with PocketMQServer(broker_conf=conf, parent_dir=tmp_path) as acl:
        acl.create_topic("T", queues=2, credentials=admin)  # signed: created and routed
        acl.create_group("G", fifo=True, credentials=admin)
        wrong = SessionCredentials("TestAdmin01", "not-the-secret")
        with pytest.raises(ServerError, match=r"creating group G2 failed: code 1 .*signature"):
            acl.create_group("G2", credentials=wrong)


def test_the_startup_wait_is_bounded(tmp_path: Path) -> None:
    server = PocketMQServer(startup_timeout_s=0, parent_dir=tmp_path)
    with pytest.raises(ServerStartError, match="did not answer within 0 s"):
        server.start()
    assert gone(server.pid)
    assert list(tmp_path.iterdir()) == []


def servers_under(directory: Path) -> list[int]:
    """PIDs of the running processes whose command line names ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and str(directory).encode() in cmdline and not gone(int(proc.name)):
            found.append(int(proc.name))
    return found


async def test_a_start_cancelled_midway_leaves_no_server(tmp_path: Path) -> None:
    entered = asyncio.Event()

    async def use() -> None:
        async with server(parent_dir=tmp_path):
            entered.set()

    task = asyncio.create_task(use())
    await wait_until(lambda: servers_under(tmp_path) != [], 30, "the server's process")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not entered.is_set()
    assert servers_under(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_dies_fails_its_stop(tmp_path: Path) -> None:
    server = PocketMQServer(parent_dir=tmp_path).start()
    os.kill(server.pid, signal.SIGKILL)
    with pytest.raises(ServerExitError, match="exited with code -9"):
        server.stop()
    assert list(tmp_path.iterdir()) == []


def test_the_server_stops_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, str(HERE / "orphan_script.py")], cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as parent:  # fmt: skip
        try:
            assert parent.stdout is not None
            started = json.loads(parent.stdout.readline())
            assert not gone(started["pid"])
        finally:
            parent.kill()
    wait_until_sync(lambda: gone(started["pid"]), 30, "the orphaned server to stop")
    log = (Path(started["workdir"]) / "serve.log").read_text()
    shutil.rmtree(started["workdir"])  # its parent died before it could remove it
    assert "Traceback" not in log, log
