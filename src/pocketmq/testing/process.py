"""PocketMQServer: ``pocketmq serve`` (NameServer + broker + gRPC endpoint) as a child process
on free ports with a temporary store, for tests; ``server()`` is its async context manager.

Lifecycle:

- ``launch()`` starts ``python -m pocketmq.cli serve`` with every port 0 and a ready file, in
  its own session (a Ctrl-C at the terminal reaches the test run, whose teardown stops the
  server, not the server directly), its stdin a pipe from this process: ``--stop-on-stdin-eof``
  makes the server stop when this process dies, however it dies.
- ``poll_ready()`` is one bounded readiness step: the child still runs, its ready file names
  the ports, the NameServer lists the broker (so 4.x clients find routes), the broker answers
  GET_BROKER_RUNTIME_INFO and the gRPC endpoint answers an HTTP/2 handshake. Past the startup
  timeout, or when the child exits, it raises ServerStartError with the server's log tail.
- ``stop()`` sends SIGTERM to the child's PID (the store is flushed), waits a bounded time,
  then SIGKILLs it; the temporary directory (store, log) is removed either way.

Starts no thread and imports nothing heavy until used: the pytest plugin imports this module in
every test run of anyone who installed pocketmq.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pocketmq.errors import PocketMQError

if TYPE_CHECKING:
    from pocketmq.protocol.acl_sign import SessionCredentials

# Readiness is polled: each step costs three local requests once the ready file exists.
_POLL_INTERVAL_S = 0.02
_LOG_TAIL_LINES = 40
_REQUEST_TIMEOUT_S = 5.0
# The directory holding the pocketmq package.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class ServerError(PocketMQError):
    """A test server failed; the message carries the tail of its log."""


class ServerStartError(ServerError):
    """The server exited or did not answer within the startup timeout."""


class ServerExitError(ServerError):
    """The server did not stop cleanly (non-zero exit, or killed after the stop timeout)."""


class PocketMQServer:
    """One ``pocketmq serve`` child. Use as a context manager (``with PocketMQServer() as s``),
    or ``start()`` / ``stop()``; ``server()`` is the async form.

    Args:
        host: the address every role listens on.
        broker_conf: broker.conf properties, with RocketMQ's names
            (``{"messageDelayLevel": "1s 2s", "autoCreateTopicEnable": "false"}``).
        startup_timeout_s: how long ``start()`` waits for the server to answer.
        stop_timeout_s: how long ``stop()`` waits after SIGTERM before SIGKILL.
        parent_dir: where the temporary directory goes (default: the system's temp dir).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        broker_conf: Mapping[str, str | int] | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 20.0,
        parent_dir: Path | None = None,
    ) -> None:
        self.host = host
        self.broker_conf = dict(broker_conf or {})
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.parent_dir = parent_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._ports: dict[str, int] | None = None
        self._deadline = 0.0

    # ------------------------------------------------------------------ addresses

    def _port(self, role: str) -> int:
        if self._ports is None:
            raise ServerError("the server has not started")
        return self._ports[role]

    @property
    def namesrv_addr(self) -> str:
        """``host:port`` of the NameServer, for 4.x clients (ours, the C++ one)."""
        return f"{self.host}:{self._port('namesrv')}"

    @property
    def grpc_endpoint(self) -> str:
        """``host:port`` of the gRPC endpoint, for 5.x clients (``ClientConfiguration``)."""
        return f"{self.host}:{self._port('grpc')}"

    @property
    def broker_addr(self) -> str:
        """``host:port`` of the broker's remoting port."""
        return f"{self.host}:{self._port('broker')}"

    @property
    def workdir(self) -> Path:
        """The temporary directory: ``store/``, ``serve.log``, ``broker.conf``."""
        if self._workdir is None:
            raise ServerError("the server has not started")
        return self._workdir

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    @property
    def log_path(self) -> Path:
        return self.workdir / "serve.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise ServerError("the server has not started")
        return self._proc.pid

    # ------------------------------------------------------------------ lifecycle

    def launch(self) -> None:
        """Start the child process and return at once; ``poll_ready()`` says when it serves."""
        if self._proc is not None:
            raise ServerError("the server was already started")
        workdir = Path(tempfile.mkdtemp(prefix="pocketmq-", dir=self.parent_dir))
        self._workdir = workdir
        args = [
            sys.executable, "-m", "pocketmq.cli", "serve", "--store", str(workdir / "store"),
            "--host", self.host, "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0",
            "--ready-file", str(workdir / "ready.json"), "--stop-on-stdin-eof",
        ]  # fmt: skip
        try:
            if self.broker_conf:
                conf = workdir / "broker.conf"
                conf.write_text("".join(f"{k}={v}\n" for k, v in self.broker_conf.items()))
                args += ["-c", str(conf)]
            with open(workdir / "serve.log", "wb") as log:
                self._proc = subprocess.Popen(
                    args, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                    cwd=workdir, env=self._child_env(workdir), start_new_session=True,
                )  # fmt: skip
        except BaseException:
            self.stop(check=False)
            raise
        self._deadline = time.monotonic() + self.startup_timeout_s

    @staticmethod
    def _child_env(workdir: Path) -> dict[str, str]:
        # The child imports the pocketmq this process runs, even one found through sys.path
        # rather than installed; a HOME of its own keeps defaults out of the user's home.
        path = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
        return {**os.environ, "HOME": str(workdir), "PYTHONPATH": path}

    def poll_ready(self) -> bool:
        """One readiness step: True once every role answers, False while still starting.
        Blocks at most for a few local requests.

        Raises:
            ServerStartError: the child exited, or the startup timeout passed; it is stopped
                and its directory removed.
        """
        proc = self._proc
        if proc is None:
            raise ServerError("launch() the server first")
        if proc.poll() is not None:
            raise self._start_failed(f"it exited with code {proc.returncode}")
        if self._ports is None:
            ready = self.workdir / "ready.json"
            if ready.exists():
                self._ports = json.loads(ready.read_text())
        if self._ports is not None and self._answers():
            return True
        if time.monotonic() >= self._deadline:
            raise self._start_failed(f"it did not answer within {self.startup_timeout_s:g} s")
        return False

    def _answers(self) -> bool:
        from pocketmq.protocol import json_body
        from pocketmq.protocol.codes import RequestCode, ResponseCode
        from pocketmq.testing.probes import http2_answers, remoting_call

        timeout_s = min(_REQUEST_TIMEOUT_S, max(0.1, self._deadline - time.monotonic()))
        try:
            info = remoting_call(
                self.namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO, timeout_s=timeout_s
            )
            if info.code != ResponseCode.SUCCESS:
                return False
            brokers = json_body.loads(info.body).get("brokerAddrTable", {}).values()
            if self.broker_addr not in {a for b in brokers for a in b["brokerAddrs"].values()}:
                return False  # not registered yet
            # Any answer will do: with aclEnable the broker refuses unsigned requests.
            remoting_call(
                self.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=timeout_s
            )
            return http2_answers(self.grpc_endpoint, timeout_s=timeout_s)
        except OSError:
            return False

    def _start_failed(self, why: str) -> ServerStartError:
        tail = self._log_tail()
        self.stop(check=False)
        return ServerStartError(f"pocketmq serve did not start: {why}; its log ends:\n{tail}")

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty)"

    def start(self) -> Self:
        """Launch and wait (bounded by ``startup_timeout_s``) until the server answers.

        Raises:
            ServerStartError: it exited or did not answer in time (the log tail says why).
        """
        self.launch()
        try:
            while not self.poll_ready():
                time.sleep(_POLL_INTERVAL_S)
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def stop(self, *, check: bool = True) -> int | None:
        """Stop the child (SIGTERM to its PID, SIGKILL after ``stop_timeout_s``) and remove the
        temporary directory. Safe to call more than once. Returns the exit code (None if
        never launched).

        Raises:
            ServerExitError: with ``check``, the server did not exit cleanly with code 0.
        """
        proc, workdir = self._proc, self._workdir
        code: int | None = None
        tail = ""
        try:
            if proc is not None:
                code = self._terminate(proc)
                if check and code != 0:
                    tail = self._log_tail()
        finally:
            self._workdir = None
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
        if tail:
            raise ServerExitError(f"pocketmq serve exited with code {code}; its log ends:\n{tail}")
        return code

    def _terminate(self, proc: subprocess.Popen[bytes]) -> int:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        return proc.returncode

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(check=exc_type is None)

    # ------------------------------------------------------------------ administration

    def create_topic(
        self, topic: str, *, queues: int = 8, message_type: str | None = None,
        timeout_s: float = 10.0, credentials: SessionCredentials | None = None,
    ) -> None:  # fmt: skip
        """Create ``topic`` on the broker (as ``mqadmin updateTopic``) and wait until the
        NameServer routes it. 5.x clients need this: their QueryRoute creates no topic.

        Args:
            queues: read and write queue count.
            message_type: the topic's ``message.type`` attribute for 5.x producers
                (``NORMAL``, ``FIFO``, ``DELAY``, ``TRANSACTION``); None leaves it unset.
            credentials: an admin account's keys for a server with ``aclEnable``
                (``pocketmq.protocol.acl_sign.SessionCredentials(access_key, secret_key)``,
                as the admin library takes them); the requests are signed with them.

        Raises:
            ServerError: the broker refused, or the route did not appear within ``timeout_s``.
        """
        from pocketmq.protocol.codes import RequestCode, ResponseCode
        from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY, PERM_READ_WRITE
        from pocketmq.testing.probes import remoting_call

        fields: dict[str, Any] = {
            "topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY, "readQueueNums": queues,
            "writeQueueNums": queues, "perm": PERM_READ_WRITE, "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0, "order": False,
        }  # fmt: skip
        if message_type is not None:
            fields["attributes"] = f"+message.type={message_type}"
        resp = remoting_call(self.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields,
                             credentials=credentials)  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            raise ServerError(f"creating topic {topic} failed: code {resp.code} {resp.remark}")
        deadline = time.monotonic() + timeout_s
        while True:
            route = remoting_call(self.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                  {"topic": topic}, credentials=credentials)  # fmt: skip
            if route.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() >= deadline:
                raise ServerError(f"the NameServer had no route for {topic} after {timeout_s:g} s")
            time.sleep(_POLL_INTERVAL_S)

    def create_group(
        self, group: str, *, fifo: bool = False, retry_max_times: int = 16,
        credentials: SessionCredentials | None = None,
    ) -> None:  # fmt: skip
        """Create or replace consumer group ``group`` (as ``mqadmin updateSubGroup``).
        A 5.x FIFO consumer needs ``fifo=True`` (consumeMessageOrderly); other groups are
        created on first use. ``credentials`` as ``create_topic`` takes them.

        Raises:
            ServerError: the broker refused.
        """
        from pocketmq.protocol import json_body
        from pocketmq.protocol.codes import RequestCode, ResponseCode
        from pocketmq.testing.probes import remoting_call

        # Members left out keep the broker's defaults (RocketMQ's SubscriptionGroupConfig).
        body = {"groupName": group, "consumeMessageOrderly": fifo, "retryMaxTimes": retry_max_times}
        resp = remoting_call(
            self.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=json_body.dumps(body), credentials=credentials,
        )  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            raise ServerError(f"creating group {group} failed: code {resp.code} {resp.remark}")

    async def create_topic_async(
        self, topic: str, *, queues: int = 8, message_type: str | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:  # fmt: skip
        """``create_topic`` on a worker thread, for async tests."""
        await asyncio.to_thread(self.create_topic, topic, queues=queues,
                                message_type=message_type, credentials=credentials)  # fmt: skip


@asynccontextmanager
async def server(
    *,
    host: str = "127.0.0.1",
    broker_conf: Mapping[str, str | int] | None = None,
    startup_timeout_s: float = 60.0,
    stop_timeout_s: float = 20.0,
    parent_dir: Path | None = None,
) -> AsyncIterator[PocketMQServer]:
    """``async with server() as s:`` a started PocketMQServer (arguments as its own), stopped
    and removed on exit. Readiness steps run on a worker thread: the event loop stays free.

    Raises:
        ServerStartError: it did not start (the log tail says why).
        ServerExitError: on a clean exit of the block, the server did not stop cleanly.
    """
    srv = PocketMQServer(
        host=host, broker_conf=broker_conf, startup_timeout_s=startup_timeout_s,
        stop_timeout_s=stop_timeout_s, parent_dir=parent_dir,
    )  # fmt: skip
    # Launched on the loop (a fork and exec): on a worker thread, a cancellation could leave
    # a child that no one stops.
    srv.launch()
    try:
        while not await asyncio.to_thread(srv.poll_ready):
            await asyncio.sleep(_POLL_INTERVAL_S)
        yield srv
    except BaseException:
        await asyncio.to_thread(srv.stop, check=False)
        raise
    await asyncio.to_thread(srv.stop)
