"""A broker set under automatic failover as real processes: a NameServer, ZooKeeper (the
conftest's) and N brokers of one brokerName (ids 1..N; a restarted broker keeps the ports its
first start bound), with helpers to find the master, wait for an election, a follower or the
brokers' convergence, kill a broker and send through our client."""

from __future__ import annotations

import collections
import itertools
import struct
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

# tests/integration, for the process helpers this set shares with the master/slave tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from broker_pair import runtime_info
from server_procs import ServerProcess, broker_with_conf, commitlog_is_prefix

from pocketmq.client import Producer
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import PullSysFlag
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from waiting import wait_until

__all__ = [
    "QUEUES", "SESSION_MS", "TOPIC", "FailoverSet", "commitlog_is_prefix", "consumable",
    "converged", "create_topic", "elected", "following", "master_of", "producer_for", "raw_send",
    "runtime_info",
]  # fmt: skip

SESSION_MS = 2000
TOPIC = "FoTopic"
QUEUES = 4
_roots = itertools.count()


class FailoverSet:
    def __init__(
        self, workdir: Path, zk_address: str, brokers: int = 3, conf: dict[str, Any] | None = None
    ) -> None:
        self.workdir = workdir
        (workdir / "namesrv").mkdir(parents=True, exist_ok=True)
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        # Listen and HA ports from each broker's first ready file (its first start binds 0).
        self.ports: dict[int, int] = {}
        self.ha_ports: dict[int, int] = {}
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
        for broker_id in range(1, brokers + 1):
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
        conf = {**self.conf, "brokerId": broker_id}
        if broker_id in self.ha_ports:
            conf["haListenPort"] = self.ha_ports[broker_id]
        proc = self.procs[broker_id] = broker_with_conf(
            self.home(broker_id), self.namesrv.addr, conf,
            listen=f"127.0.0.1:{self.ports.get(broker_id, 0)}",
        )  # fmt: skip
        self.ports[broker_id], self.ha_ports[broker_id] = proc.port, proc.ready["ha"]
        return proc

    def kill(self, broker_id: int) -> None:
        """SIGKILL, and reap it."""
        proc = self.procs[broker_id]
        proc.proc.kill()
        proc.proc.wait()

    def stop(self) -> None:
        stop_all([*self.procs.values(), self.namesrv])


async def master_of(fo: FailoverSet, client: ClientInstance) -> int | None:
    """The broker that registers as master (brokerId 0 in its runtime info), if one does."""
    for broker_id in fo.procs:
        if fo.procs[broker_id].proc.poll() is not None:
            continue
        info = await runtime_info(client, fo.addr(broker_id))
        if info is not None and info["brokerId"] == "0":
            return broker_id
    return None


async def elected(fo: FailoverSet, client: ClientInstance, other_than: int | None = None) -> int:
    found: list[int] = []

    async def check() -> bool:
        m = await master_of(fo, client)
        if m is not None and m != other_than:
            found.append(m)
            return True
        return False

    await wait_until(check, 30, "a master")
    return found[-1]


async def following(fo: FailoverSet, client: ClientInstance, broker_id: int) -> None:
    async def check() -> bool:
        info = await runtime_info(client, fo.addr(broker_id))
        return (
            info is not None and info["brokerRole"] == "SLAVE" and info.get("haConnected") == "true"
        )

    await wait_until(check, 30, f"broker {broker_id} following the master")


async def converged(fo: FailoverSet, client: ClientInstance) -> None:
    async def check() -> bool:
        tops = set()
        for broker_id in fo.procs:
            info = await runtime_info(client, fo.addr(broker_id))
            if info is None:
                return False
            tops.add(info["commitLogMaxOffset"])
        return len(tops) == 1

    await wait_until(check, 30, "every broker holding the master's whole log")


async def raw_send(client: ClientInstance, addr: str) -> int:
    header = {"producerGroup": "P", "topic": TOPIC, "queueId": 0, "sysFlag": 0,
              "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
              "reconsumeTimes": 0, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
    }  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"stale")
    return (await client.remoting.invoke(addr, cmd, 5)).code


async def consumable(client: ClientInstance, addr: str) -> collections.Counter[int]:
    """Every message of the topic the broker at ``addr`` serves, by number."""
    seen: collections.Counter[int] = collections.Counter()
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            fields = {"consumerGroup": "FoCheck", "topic": TOPIC, "queueId": queue_id,
                      "queueOffset": offset, "maxMsgNums": 32, "sysFlag": PullSysFlag.SUBSCRIPTION,
                      "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*",
                      "subVersion": 0}  # fmt: skip
            cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
            resp = await client.remoting.invoke(addr, cmd, 5)
            if resp.code != ResponseCode.SUCCESS:
                break
            pos = 0
            while pos < len(resp.body):
                size = struct.unpack_from(">i", resp.body, pos)[0]
                msg = decode_message(resp.body[pos : pos + size])
                seen[int(msg.body.decode().removeprefix("m-"))] += 1
                pos += size
            offset = int(resp.ext_fields["nextBeginOffset"])
    return seen


async def create_topic(client: ClientInstance, addr: str) -> None:
    fields = {"topic": TOPIC, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    assert (await client.remoting.invoke(addr, cmd, 5)).code == ResponseCode.SUCCESS


def producer_for(fo: FailoverSet) -> Producer:
    instance = ClientInstance(fo.namesrv.addr, f"fo-producer@{time.time_ns()}",
                              poll_name_server_interval_s=0.5)  # fmt: skip
    return Producer("FoProducer", instance=instance, send_timeout_ms=3000)


class _Stoppable(Protocol):
    def stop(self) -> object: ...


def stop_all(stoppables: Iterable[_Stoppable]) -> None:
    """Stop each, even when an earlier one's stop failed (a broker that does not exit in time
    is killed by its own stop, then reported); the first failure is raised once all are
    stopped, so one stuck process leaks no other."""
    failures: list[Exception] = []
    for item in stoppables:
        try:
            item.stop()
        except Exception as exc:  # the others are still stopped
            failures.append(exc)
    if failures:
        raise failures[0]
