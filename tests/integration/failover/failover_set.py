"""A broker set under automatic failover as real processes: a NameServer, ZooKeeper (the
conftest's) and N brokers of one brokerName (ids 1..N, fixed ports so that a restarted broker
keeps its address), with helpers to find the master, kill it and send through our client."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path
from typing import Any

# tests/integration, for the process helpers this set shares with the master/slave tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from broker_pair import free_port
from server_procs import ServerProcess, broker_with_conf, commitlog_is_prefix

from pocketmq.client.instance import ClientInstance
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand

__all__ = ["SESSION_MS", "FailoverSet", "commitlog_is_prefix", "master_of", "runtime_info"]

SESSION_MS = 2000
_roots = itertools.count()


class FailoverSet:
    def __init__(
        self, workdir: Path, zk_address: str, brokers: int = 3, conf: dict[str, Any] | None = None
    ) -> None:
        self.workdir = workdir
        (workdir / "namesrv").mkdir(parents=True, exist_ok=True)
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        self.ports = {i: free_port() for i in range(1, brokers + 1)}
        self.conf: dict[str, Any] = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-fo",
            "brokerRole": "SYNC_MASTER",
            "flushDiskType": "SYNC_FLUSH",
            "failoverZkAddress": zk_address,
            "failoverSessionTimeoutMs": SESSION_MS,
            "failoverZkRoot": f"/fo{next(_roots)}-{int(time.time() * 1000)}",
            "syncFlushTimeout": 2000,
            "haSendHeartbeatInterval": 500,
            "haHousekeepingInterval": 3000,
            "slaveSyncInterval": 500,
            **(conf or {}),
        }
        self.procs: dict[int, ServerProcess] = {}
        for broker_id in self.ports:
            self.start(broker_id)

    def home(self, broker_id: int) -> Path:
        return self.workdir / f"broker{broker_id}"

    def store(self, broker_id: int) -> Path:
        return self.home(broker_id) / "store"

    def addr(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.ports[broker_id]}"

    def start(self, broker_id: int) -> ServerProcess:
        old = self.procs.pop(broker_id, None)
        if old is not None:
            old.stop()
        self.procs[broker_id] = broker_with_conf(
            self.home(broker_id), self.namesrv.addr, {**self.conf, "brokerId": broker_id},
            listen=self.addr(broker_id),
        )  # fmt: skip
        return self.procs[broker_id]

    def kill(self, broker_id: int) -> None:
        """SIGKILL, and reap it."""
        proc = self.procs[broker_id]
        proc.proc.kill()
        proc.proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()
        self.namesrv.stop()


async def runtime_info(client: ClientInstance, addr: str) -> dict[str, str] | None:
    """A broker's GET_BROKER_RUNTIME_INFO table, None when it does not answer."""
    try:
        resp = await client.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 2
        )
    except (ConnectionError, TimeoutError):
        return None
    if resp.code != ResponseCode.SUCCESS:
        return None
    table: dict[str, str] = json_body.loads(resp.body)["table"]
    return table


async def master_of(fo: FailoverSet, client: ClientInstance) -> int | None:
    """The broker that registers as master (brokerId 0 in its runtime info), if one does."""
    for broker_id in fo.procs:
        if fo.procs[broker_id].proc.poll() is not None:
            continue
        info = await runtime_info(client, fo.addr(broker_id))
        if info is not None and info["brokerId"] == "0":
            return broker_id
    return None
