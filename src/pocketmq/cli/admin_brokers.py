"""``pocketmq admin broker-status``: every broker of the cluster with its role, failover
epoch and replication lag, from GET_BROKER_CLUSTER_INFO and each broker's
GET_BROKER_RUNTIME_INFO (mqadmin clusterList / brokerStatus in one table).

A slave's lag comes from its master's runtime info, where the master reports each HA
connection under the slave's ``haClientAddress``; a slave its master does not report (not
connected) shows its distance from the master's max offset and no seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from pocketmq.cli.admin import AdminError, _call, _run
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.remoting import RemotingClient


@dataclass(frozen=True, slots=True)
class BrokerRow:
    cluster: str
    name: str
    broker_id: int  # as registered: 0 is the master
    addr: str
    info: dict[str, str]  # runtime info; empty when the broker did not answer


async def broker_rows(client: RemotingClient, namesrv: str) -> list[BrokerRow]:
    """Every registered broker with its runtime info."""
    resp = await _call(client, namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
    info: Any = json_body.loads(resp.body)
    rows = []
    for cluster, names in sorted(info["clusterAddrTable"].items()):
        for name in sorted(names):
            addrs = info["brokerAddrTable"][name]["brokerAddrs"]
            for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0])):
                try:
                    got = await _call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
                    table = {str(k): str(v) for k, v in json_body.loads(got.body)["table"].items()}
                except (AdminError, ConnectionError, TimeoutError):
                    table = {}
                except (RemoteProtocolError, KeyError, TypeError, AttributeError) as exc:
                    raise AdminError(f"{addr} sent a bad runtime info body: {exc!r}") from exc
                rows.append(BrokerRow(cluster, name, int(bid), addr, table))
    return rows


def lag_of(row: BrokerRow, master: BrokerRow | None) -> tuple[str, str]:
    """A slave's lag in bytes and seconds as printed ("-" for a master or what is unknown)."""
    if row.broker_id == 0 or master is None or not master.info or not row.info:
        return "-", "-"
    conn = row.info.get("haClientAddress", "")
    if conn and f"haSlaveLagBytes_{conn}" in master.info:
        return master.info[f"haSlaveLagBytes_{conn}"], master.info[f"haSlaveLagSeconds_{conn}"]
    behind = int(master.info["commitLogMaxOffset"]) - int(row.info["commitLogMaxOffset"])
    return str(max(0, behind)), "-"


@click.command("broker-status")
@click.pass_obj
def broker_status(namesrv: str) -> None:
    """Each broker's role, failover epoch, max offset and replication lag."""
    rows = _run(lambda c: broker_rows(c, namesrv))
    masters = {r.name: r for r in rows if r.broker_id == 0}
    click.echo(
        f"{'cluster':<16} {'broker':<16} {'id':>3}  {'address':<22} {'role':<13} {'epoch':>5} "
        f"{'max offset':>12} {'lag bytes':>10} {'lag s':>8}"
    )
    for row in rows:
        role = row.info.get("brokerRole", "UNREACHABLE")
        epoch = row.info.get("failoverEpoch", "-")
        top = row.info.get("commitLogMaxOffset", "-")
        lag_bytes, lag_s = lag_of(row, masters.get(row.name))
        click.echo(
            f"{row.cluster:<16} {row.name:<16} {row.broker_id:>3}  {row.addr:<22} {role:<13} "
            f"{epoch:>5} {top:>12} {lag_bytes:>10} {lag_s:>8}"
        )
