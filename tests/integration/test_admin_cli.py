"""`pocketmq admin` against a live `pocketmq serve`: topics, routes, cluster, send, consume,
subscription groups. The verbs run in this process (admin_cli); test_admin_verbs also runs
`python -m pocketmq.cli admin` as a user does, succeeding and failing."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from admin_cli import admin, admin_process, ok
from server_procs import ServerProcess

pytestmark = pytest.mark.integration


def on_terminal(namesrv: str, *args: str) -> tuple[str, str]:
    """A verb run with its stderr on a terminal (where progress bars show) and its stdout
    piped: (stdout, what the terminal received)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *args],
        stdout=subprocess.PIPE, stderr=slave, text=True, env={**os.environ, "TERM": "xterm"},
    )  # fmt: skip
    os.close(slave)
    received = b""
    try:
        while chunk := os.read(master, 65536):
            received += chunk
    except OSError:  # EIO: the verb exited and closed the terminal
        pass
    finally:
        os.close(master)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, received
    return stdout, received.decode(errors="replace")


def test_admin_verbs(tmp_path: Path) -> None:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    ns = f"127.0.0.1:{proc.ready['namesrv']}"
    try:
        assert "OK" in ok(ns, "update-topic", "-t", "Orders", "-r", "2", "-w", "2")
        # Once as a user runs it: a process of its own, exit status 0, no traceback.
        listed = admin_process(ns, "topic-list")
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        assert "Orders" in listed.stdout.split()
        assert '"writeQueueNums": 2' in ok(ns, "topic-route", "-t", "Orders", "--json")
        assert "DefaultCluster" in ok(ns, "cluster-list")
        sent = json.loads(ok(
            ns, "send-message", "-t", "Orders", "-p", "hello admin", "--tags", "A", "-k", "K1",
            "--json",
        ))  # fmt: skip
        assert sent[0]["offset"] == 0
        consumed = json.loads(ok(ns, "consume-message", "-t", "Orders", "--tags", "A", "--json"))
        assert [(m["body"], m["keys"]) for m in consumed] == [("hello admin", "K1")]
        assert "hello admin" not in ok(ns, "consume-message", "-t", "Orders", "--tags", "B")
        printed = json.loads(ok(ns, "print-msg", "-t", "Orders", "--json"))
        assert [(m["body"], m["tags"]) for m in printed] == [("hello admin", "A")]
        assert json.loads(ok(ns, "print-msg", "-t", "Orders", "-e", "1", "--json")) == []
        # Dumping a topic shows a progress bar over its queues on a terminal, off stdout.
        printed_json, terminal = on_terminal(ns, "print-msg", "-t", "Orders", "--json")
        assert json.loads(printed_json) == printed
        assert "reading 2 queues of Orders" in terminal
        progress = ok(ns, "consumer-progress", "-g", "NoSuchGroup", "-t", "Orders")
        assert "total lag: 1" in progress
        assert "OK" in ok(ns, "delete-topic", "-t", "Orders")
        missing = admin(ns, "topic-route", "-t", "Orders")
        assert missing.returncode == 1 and "17" in missing.stderr
    finally:
        assert proc.stop() == 0
    down = admin_process(ns, "topic-list")
    assert down.returncode == 1 and "cannot connect" in down.stderr
    assert "Traceback" not in down.stderr


def test_subscription_group_verbs(tmp_path: Path) -> None:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    ns = f"127.0.0.1:{proc.ready['namesrv']}"
    broker = f"127.0.0.1:{proc.ready['broker']}"

    def group_config() -> dict[str, Any]:
        configs: dict[str, dict[str, Any]] = json.loads(
            ok(ns, "subscription-group", "-g", "CG_ADMIN", "--json")
        )
        assert list(configs) == [broker]
        return configs[broker]

    try:
        missing = admin(ns, "subscription-group", "-g", "CG_ADMIN")
        assert missing.returncode == 1 and "no master broker has" in missing.stderr
        created = json.loads(
            ok(ns, "update-subscription-group", "-g", "CG_ADMIN", "-r", "3", "-o", "--json")
        )
        assert [(r["broker"], r["group"], r["retryMaxTimes"]) for r in created] == [
            (broker, "CG_ADMIN", 3)
        ]
        cfg = group_config()
        assert (cfg["retryMaxTimes"], cfg["consumeMessageOrderly"]) == (3, True)
        assert (cfg["retryQueueNums"], cfg["consumeEnable"]) == (1, True)  # RocketMQ's defaults
        # Options left out keep their values.
        ok(ns, "update-subscription-group", "-g", "CG_ADMIN", "--no-orderly", "-q", "2",
           "--no-consume-enable", "--broadcast", "-c", "DefaultCluster")  # fmt: skip
        cfg = group_config()
        assert cfg["retryMaxTimes"] == 3
        assert (cfg["consumeMessageOrderly"], cfg["retryQueueNums"]) == (False, 2)
        assert (cfg["consumeEnable"], cfg["consumeBroadcastEnable"]) == (False, True)
        for args, code, why in (
            (("-g", " "), 2, "blank"),
            (("-g", "CG_ADMIN", "-r", "-1"), 2, "-1"),
            (("-g", "CG_ADMIN", "-c", "NoSuchCluster"), 1, "no master broker found"),
        ):
            bad = admin(ns, "update-subscription-group", *args)
            assert bad.returncode == code and why in bad.stderr, bad.stderr
            assert "Traceback" not in bad.stderr
        deleted = json.loads(
            ok(ns, "delete-subscription-group", "-g", "CG_ADMIN", "-c", "DefaultCluster", "--json")
        )
        assert deleted == [{"broker": broker, "group": "CG_ADMIN"}]
        gone = admin(ns, "subscription-group", "-g", "CG_ADMIN")
        assert gone.returncode == 1 and "no master broker has" in gone.stderr
    finally:
        assert proc.stop() == 0
