"""Cluster and NameServer requests: the broker list with each broker's runtime info and
replication lag (mqadmin clusterList / brokerStatus), a broker's write permission at the
NameServers (wipeWritePerm / addWritePerm), and the NameServers' own settings
(getNamesrvConfig / updateNamesrvConfig).

A slave's lag comes from its master's runtime info, where the master reports each HA
connection under the slave's ``haClientAddress``; a slave its master does not report (not
connected) shows its distance from the master's max offset and no seconds.

No formatting here; functions take an AdminClient and return parsed values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import MASTER_ID


@dataclass(frozen=True, slots=True)
class BrokerRow:
    cluster: str
    name: str
    broker_id: int  # as registered: 0 is the master
    addr: str
    info: dict[str, str]  # runtime info; empty when the broker did not answer


async def broker_rows(client: AdminClient) -> list[BrokerRow]:
    """Every registered broker with its runtime info (GET_BROKER_RUNTIME_INFO)."""
    info = await client.cluster_info()
    rows = []
    for cluster, names in sorted(info.clusters.items()):
        for name in sorted(names):
            for bid, addr in sorted(info.brokers.get(name, {}).items()):
                try:
                    got = await client.call_json(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
                    table = {str(k): str(v) for k, v in got["table"].items()}
                except AdminError as exc:
                    if isinstance(exc.__cause__, RemoteProtocolError):
                        raise
                    table = {}  # unreachable or refused: shown as such
                except (KeyError, TypeError, AttributeError) as exc:
                    raise AdminError(f"{addr} sent a bad runtime info body: {exc!r}") from exc
                rows.append(BrokerRow(cluster, name, bid, addr, table))
    return rows


def lag_of(row: BrokerRow, master: BrokerRow | None) -> tuple[str, str]:
    """A slave's lag in bytes and seconds as printed ("-" for a master or what is unknown)."""
    if row.broker_id == MASTER_ID or master is None or not master.info or not row.info:
        return "-", "-"
    conn = row.info.get("haClientAddress", "")
    if conn and f"haSlaveLagBytes_{conn}" in master.info:
        return master.info[f"haSlaveLagBytes_{conn}"], master.info[f"haSlaveLagSeconds_{conn}"]
    behind = int(master.info["commitLogMaxOffset"]) - int(row.info["commitLogMaxOffset"])
    return str(max(0, behind)), "-"


async def _each_namesrv(
    client: AdminClient, code: int, broker_name: str, count_field: str
) -> list[tuple[str, int]]:
    done = []
    for addr in client.namesrv_addrs:
        resp = await client.call(addr, code, {"brokerName": broker_name})
        try:
            done.append((addr, int(resp.ext_fields.get(count_field, "0"))))
        except ValueError as exc:
            raise AdminError(f"{addr} sent a bad {count_field}: {exc}") from exc
    return done


async def wipe_write_perm(client: AdminClient, broker_name: str) -> list[tuple[str, int]]:
    """WIPE_WRITE_PERM_OF_BROKER on each NameServer: producers stop choosing the broker.
    Returns (NameServer, topics changed) pairs (WipeWritePermOfBrokerResponseHeader)."""
    return await _each_namesrv(
        client, RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount"
    )


async def add_write_perm(client: AdminClient, broker_name: str) -> list[tuple[str, int]]:
    """ADD_WRITE_PERM_OF_BROKER on each NameServer: the broker's topics are read-write
    again. Returns (NameServer, topics changed) pairs (AddWritePermOfBrokerResponseHeader)."""
    return await _each_namesrv(
        client, RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount"
    )


def parse_config_text(text: bytes) -> dict[str, str]:
    """A config body (MixAll.properties2String: ``key=value`` lines, nothing escaped)."""
    config = {}
    for line in text.decode("utf-8", "replace").splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            config[key.strip()] = value.strip()
    return config


async def namesrv_config(client: AdminClient) -> dict[str, dict[str, str]]:
    """GET_NAMESRV_CONFIG of each NameServer: address -> settings."""
    configs = {}
    for addr in client.namesrv_addrs:
        resp = await client.call(addr, RequestCode.GET_NAMESRV_CONFIG)
        configs[addr] = parse_config_text(resp.body)
    return configs


async def update_namesrv_config(client: AdminClient, settings: dict[str, str]) -> list[str]:
    """UPDATE_NAMESRV_CONFIG on each NameServer (the body as properties text); returns the
    NameServers updated. A NameServer that refuses stops the update there."""
    if not settings:
        raise AdminError("no setting to update (expected key=value)")
    body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
    for addr in client.namesrv_addrs:
        await client.call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
    return list(client.namesrv_addrs)
