"""ACL with the unmodified clients against ``pocketmq serve`` with aclEnable: the C++-based
``rocketmq==0.4.4`` (session credentials, remoting signatures) and
``rocketmq-python-client==5.1.2`` (Credentials, the gRPC ``authorization`` header).

For each: the right key sends and reads; a wrong secret, an unknown key and a missing
permission are refused. The C++ client reports a refused send as "No route info" after its
retries and a refused pull as a broker timeout, so what the broker answered (SYSTEM_ERROR,
the AclException's message) is read from the broker's log; the 5.x client reports the gRPC
status PERMISSION_DENIED itself, or a failed route fetch when QueryRoute was the call refused.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from acl_setup import (
    ADMIN,
    CONSUMER,
    GROUP,
    PRODUCER,
    TOPIC,
    UNKNOWN,
    WRONG_SECRET,
    acl_serve,
)
from cpp_driver import SCRIPT as CPP_SCRIPT
from cpp_driver import cpp_client_installed
from server_procs import ServerProcess

from pocketmq.protocol.codes import RequestCode, ResponseCode

pytestmark = [pytest.mark.interop, pytest.mark.slow]
GRPC_SCRIPT = Path(__file__).with_name("grpc_client_script.py")
REFUSED = f"with code {int(ResponseCode.SYSTEM_ERROR)}"


def run(tmp_path: Path, script: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},  # both clients log under $HOME
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with acl_serve(tmp_path) as (proc, _):
        namesrv = f"127.0.0.1:{proc.ready['namesrv']}"
        created = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv,
             "--access-key", ADMIN[0], "--secret-key", ADMIN[1], "update-topic", "-t", TOPIC],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        yield proc


def refusals(proc: ServerProcess, code: int) -> str:
    """The broker's log lines of refused requests of this code."""
    return "\n".join(
        line
        for line in proc.log_path.read_text().splitlines()
        if f"ACL refused request code {code} " in line
    )


@pytest.mark.skipif(not cpp_client_installed(), reason="rocketmq==0.4.4 is not installed")
def test_cpp_client_with_session_credentials(tmp_path: Path, server: ServerProcess) -> None:
    namesrv = f"127.0.0.1:{server.ready['namesrv']}"
    sent = run(tmp_path, CPP_SCRIPT, "acl_produce", namesrv, TOPIC, *PRODUCER)
    assert sent == {"status": "OK"}

    for keys in (WRONG_SECRET, UNKNOWN, CONSUMER):
        refused = run(tmp_path, CPP_SCRIPT, "acl_produce", namesrv, TOPIC, *keys)
        assert "error" in refused, refused
    sends = refusals(server, RequestCode.SEND_MESSAGE)
    assert f"{REFUSED}: Check signature failed for accessKey={PRODUCER[0]}" in sends
    assert f"{REFUSED}: No acl config for {UNKNOWN[0]}" in sends
    assert f"{REFUSED}: No permission for topic:{TOPIC}" in sends

    read = run(tmp_path, CPP_SCRIPT, "acl_pull", namesrv, TOPIC, GROUP, *CONSUMER)
    assert read["bodies"] == ["from-cpp"] and read["errors"] == []

    denied = run(tmp_path, CPP_SCRIPT, "acl_pull", namesrv, TOPIC, GROUP, *PRODUCER)
    assert denied["bodies"] == [] and set(denied["statuses"]) == {"BROKER_TIMEOUT"}
    wrong = run(tmp_path, CPP_SCRIPT, "acl_pull", namesrv, TOPIC, GROUP, *WRONG_SECRET)
    assert wrong["bodies"] == []
    pulls = refusals(server, RequestCode.PULL_MESSAGE)
    assert f"{REFUSED}: No permission for topic:{TOPIC}" in pulls
    assert f"{REFUSED}: Check signature failed for accessKey={PRODUCER[0]}" in pulls


@pytest.mark.skipif(
    importlib.util.find_spec("rocketmq") is None, reason="rocketmq-python-client is not installed"
)
def test_official_5x_client_with_credentials(tmp_path: Path, server: ServerProcess) -> None:
    endpoint = f"127.0.0.1:{server.ready['grpc']}"
    sent = run(tmp_path, GRPC_SCRIPT, "acl_produce", endpoint, TOPIC, *PRODUCER)
    assert "sent" in sent, sent

    # A wrong secret or an unknown key: the producer's first call (QueryRoute) is refused.
    for keys in (WRONG_SECRET, UNKNOWN):
        refused = run(tmp_path, GRPC_SCRIPT, "acl_produce", endpoint, TOPIC, *keys)
        assert "failed to fetch topic:AclTopic route" in refused["error"], refused
    log = server.log_path.read_text()
    assert "QueryRoute from ipv4:127.0.0.1" in log
    assert f"PERMISSION_DENIED: Check signature failed for accessKey={PRODUCER[0]}" in log
    assert f"PERMISSION_DENIED: No acl config for {UNKNOWN[0]}" in log
    # A missing permission: routing needs PUB or SUB, sending PUB, which the consumer lacks.
    no_pub = run(tmp_path, GRPC_SCRIPT, "acl_produce", endpoint, TOPIC, *CONSUMER)
    assert "StatusCode.PERMISSION_DENIED" in no_pub["error"], no_pub
    assert f"No permission for topic:{TOPIC}" in no_pub["error"]

    got = run(tmp_path, GRPC_SCRIPT, "acl_receive", endpoint, TOPIC, GROUP, *CONSUMER)
    assert got == {"bodies": ["from-5x"]}
    no_sub = run(tmp_path, GRPC_SCRIPT, "acl_receive", endpoint, TOPIC, GROUP, *PRODUCER)
    assert "StatusCode.PERMISSION_DENIED" in no_sub["error"], no_sub
    assert f"No permission for topic:{TOPIC}" in no_sub["error"]
