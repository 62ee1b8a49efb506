"""A NameServer, a master broker and its slave (same brokerName, brokerRole=SLAVE, brokerId=1)
as real processes; a broker restarted keeps the ports its first start bound. With raw-request
helpers to read a broker's tables and runtime info."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server_procs import ServerProcess

from pocketmq.client.instance import ClientInstance
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand


class Pair:
    """A NameServer, a master (id 0) and, once started, its slave (id 1) of ``broker_name``;
    ``start`` starts (or restarts) either, ``procs[role]`` is its process."""

    def __init__(self, workdir: Path, broker_name: str = "broker-a") -> None:
        self.broker_name = broker_name
        self.workdir = workdir
        (workdir / "namesrv").mkdir(parents=True)
        self.namesrv = ServerProcess("namesrv", workdir / "namesrv")
        # A role's listen and HA ports, from its first start's ready file: each start binds
        # port 0 the first time (a port probed before the start could be taken meanwhile).
        self.ports: dict[str, int] = {}
        self.ha_ports: dict[str, int] = {}
        self.procs: dict[str, ServerProcess] = {}
        self.start("master")

    def home(self, role: str) -> Path:
        return self.workdir / role

    def addr(self, role: str) -> str:
        return f"127.0.0.1:{self.ports[role]}"

    def start(self, role: str) -> ServerProcess:
        """Start the role's broker, after reaping its previous process (killed or stopped)."""
        if role in self.procs:
            self.procs[role].stop()
        home = self.home(role)
        home.mkdir(exist_ok=True)
        conf = home / "broker.conf"
        lines = ["brokerClusterName=DefaultCluster", f"brokerName={self.broker_name}"]
        if role == "slave":
            lines += ["brokerId=1", "brokerRole=SLAVE", "slaveSyncInterval=500"]
        if role in self.ha_ports:
            lines.append(f"haListenPort={self.ha_ports[role]}")
        conf.write_text("\n".join(lines) + "\n")
        proc = self.procs[role] = ServerProcess(
            "broker", home, "-c", str(conf), "--store", str(home / "store"),
            "--listen", f"127.0.0.1:{self.ports.get(role, 0)}", "-n", self.namesrv.addr,
            listen=False,
        )  # fmt: skip
        self.ports[role], self.ha_ports[role] = proc.port, proc.ready["ha"]
        return proc

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()
        self.namesrv.stop()


async def request(
    client: ClientInstance, addr: str, code: int, fields: dict[str, Any] | None = None,
    body: bytes = b"",
) -> RemotingCommand:  # fmt: skip
    return await client.remoting.invoke(addr, RemotingCommand.request(code, fields, body), 5)


async def table(client: ClientInstance, addr: str, code: int) -> Any:
    resp = await request(client, addr, code)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return json_body.loads(resp.body)


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
    info: dict[str, str] = json_body.loads(resp.body)["table"]
    return info
