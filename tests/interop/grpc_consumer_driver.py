"""Helpers of test_grpc_consume.py: ``pocketmq serve`` that can be killed and restarted on its
ports, topic and group admin, the dead-letter reader (our 4.x client), and ``Client``, which
drives grpc_consumer_script.py (the official 5.x client) in a subprocess. This module never
imports the 5.x client: its protobuf names clash with pocketmq's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from server_procs import ServerProcess

from pocketmq.client import ConsumeFromWhere, LitePullConsumer, MessageExt, MessageQueue
from pocketmq.client.instance import ClientInstance
from waiting import wait_until

SCRIPT = Path(__file__).with_name("grpc_consumer_script.py")


class Serve:
    """``pocketmq serve`` with a broker.conf; ``restart`` keeps the store and the ports."""

    def __init__(self, tmp_path: Path, conf: str) -> None:
        self.tmp_path = tmp_path
        self.conf = tmp_path / "broker.conf"
        # ``restart`` names the broker port; the HA port would then be that port + 1, which any
        # socket may hold: any free port instead.
        self.conf.write_text(conf + "\nhaListenPort=0\n")
        self.store = tmp_path / "store"
        self.runs = 0
        self.proc = self._start("--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0")
        self.ports: dict[str, int] = self.proc.ready
        self.namesrv = f"127.0.0.1:{self.ports['namesrv']}"
        self.grpc = f"127.0.0.1:{self.ports['grpc']}"

    def _start(self, *ports: str) -> ServerProcess:
        self.runs += 1
        workdir = self.tmp_path / f"serve{self.runs}"  # one log per run
        workdir.mkdir()
        return ServerProcess(
            "serve", workdir, "-c", str(self.conf), "--store", str(self.store), *ports,
            listen=False,
        )  # fmt: skip

    def kill(self) -> int:
        self.proc.proc.send_signal(signal.SIGKILL)
        return self.proc.stop()

    def restart(self) -> None:
        self.proc = self._start(
            "--namesrv-port", str(self.ports["namesrv"]),
            "--broker-port", str(self.ports["broker"]),
            "--grpc-port", str(self.ports["grpc"]),
        )  # fmt: skip

    def log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")[-5000:]


def run_cli(tmp_path: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def create_topic(serve: Serve, topic: str) -> None:
    # 5.x clients need the topic to exist: QueryRoute does not auto-create, as with RocketMQ.
    run_cli(serve.tmp_path, "admin", "-n", serve.namesrv, "update-topic", "-t", topic)


def set_group(serve: Serve, group: str, retry_max_times: int, *, orderly: bool = False) -> None:
    """Create the group on every master before its clients start: the settings reply (FIFO
    flag, max attempts, backoff) is built from it."""
    run_cli(
        serve.tmp_path, "admin", "-n", serve.namesrv, "update-subscription-group", "-g", group,
        "-r", str(retry_max_times), "--orderly" if orderly else "--no-orderly",
    )  # fmt: skip


def read_dlq(serve: Serve, group: str, timeout_s: float = 20) -> list[MessageExt]:
    """What ``%DLQ%{group}`` holds, read with our 4.x client once the topic exists."""
    topic = f"%DLQ%{group}"

    async def read() -> list[MessageExt]:
        async with asyncio.timeout(timeout_s):
            instance = ClientInstance(serve.namesrv, "dlq-route@interop")

            async def routed() -> bool:
                return await instance.fetch_route(topic) is not None

            try:
                await wait_until(routed, timeout_s, f"a route of {topic}", interval_s=0.1)
            finally:
                await instance.close()
            reader = LitePullConsumer(
                f"CG_DLQ_READER_{group}", serve.namesrv, broker_suspend_ms=1000,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )  # fmt: skip
            reader.assign([MessageQueue(topic, "broker-a", 0)])
            async with reader:
                polled: list[MessageExt] = []
                while not polled:
                    polled = await reader.poll(1)
                return polled + await reader.poll(1)  # and whatever else went there

    return asyncio.run(read())


# ---------------------------------------------------------------------- the 5.x client


class Client:
    """grpc_consumer_script.py in a subprocess: ``call`` sends one command and returns its
    reply; listener calls of a push consumer collect in ``events``."""

    def __init__(self, tmp_path: Path, endpoint: str, name: str = "client") -> None:
        self.home = tmp_path / name
        self.home.mkdir()
        self._stderr: IO[str] = open(self.home / "stderr.txt", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), endpoint],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            cwd=self.home, env={**os.environ, "HOME": str(self.home)},  # it logs under ~/logs
        )  # fmt: skip
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._eof = False
        self._seq = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = {"event": "stray", "line": line}
            with self._cond:
                if "seq" in obj:
                    self._replies[obj["seq"]] = obj
                else:
                    self.events.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def diagnostics(self) -> str:
        stderr = (self.home / "stderr.txt").read_text(errors="replace")[-3000:]
        logs = sorted((self.home / "logs").rglob("*.log")) if (self.home / "logs").exists() else []
        tail = "".join(p.read_text(errors="replace")[-4000:] for p in logs)
        return f"\n--- client stderr:\n{stderr}\n--- client log:\n{tail}"

    def call(self, op: str, timeout_s: float = 60, **args: Any) -> dict[str, Any]:
        seq = next(self._seq)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "seq": seq, **args}) + "\n")
        self.proc.stdin.flush()
        with self._cond:
            self._cond.wait_for(lambda: seq in self._replies or self._eof, timeout_s)
            reply = self._replies.pop(seq, None)
        assert reply is not None, f"no reply to {op} {args}" + self.diagnostics()
        return reply

    def ok(self, op: str, **args: Any) -> dict[str, Any]:
        reply = self.call(op, **args)
        assert "error" not in reply, (op, args, reply)
        return reply

    def until(self, done: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> bool:
        """Wait until ``done(events)``; False if it is not true after ``timeout_s``."""
        with self._cond:
            self._cond.wait_for(lambda: done(self.events) or self._eof, timeout_s)
            return done(self.events)

    def wait_events(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout_s: float
    ) -> list[dict[str, Any]]:
        ok = self.until(done, timeout_s)
        events = self.consumed()
        assert ok, (
            "timed out; consumed so far:\n" + "\n".join(json.dumps(e) for e in events)
            + self.diagnostics()
        )  # fmt: skip
        return events

    def consumed(self) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == "consume"]

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"op": "exit", "seq": 0}) + "\n")
                self.proc.stdin.close()
            self.proc.wait(30)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait()
        finally:
            self._reader.join(5)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()


Got = dict[str, Any]  # a received message, plus the receive's sent_at and at


def receive(client: Client, invisible_s: int, max_num: int = 16) -> list[Got]:
    reply = client.ok("receive", max_num=max_num, invisible_s=invisible_s)
    return [{**m, "sent_at": reply["sent_at"], "at": reply["at"]} for m in reply["messages"]]


def receive_until(
    client: Client,
    done: Callable[[list[Got]], bool],
    *,
    invisible_s: int,
    timeout_s: float = 30,
    tolerate_errors: bool = False,
) -> list[Got]:
    """Receive until ``done(everything received)``; every receive's messages are kept."""
    got: list[Got] = []
    errors: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while not done(got):
        assert time.monotonic() < deadline, f"timed out; received {got}, errors {errors[-3:]}"
        reply = client.call("receive", max_num=16, invisible_s=invisible_s)
        if "error" in reply:
            assert tolerate_errors, reply
            errors.append(reply)
            # The server is restarting: pause before the next receive (this loop is the wait).
            time.sleep(0.2)
            continue
        got += [{**m, "sent_at": reply["sent_at"], "at": reply["at"]} for m in reply["messages"]]
    return got


def receive_for(client: Client, seconds: float, invisible_s: int) -> list[Got]:
    """Everything received in the next ``seconds`` (an empty receive is held for the client's
    await duration, so this may run that much longer)."""
    end = time.monotonic() + seconds
    return receive_until(
        client, lambda _: time.monotonic() >= end, invisible_s=invisible_s, timeout_s=seconds + 10
    )
