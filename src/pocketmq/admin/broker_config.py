"""A broker's settings, as mqadmin's getBrokerConfig and updateBrokerConfig handle them:
GET_BROKER_CONFIG (26: a Java-properties body and the config's data version in the
``version`` header) and UPDATE_BROKER_CONFIG (25: a properties body), to one broker or to
every broker (masters and slaves) of a cluster.

No formatting here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.protocol.codes import RequestCode


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    addr: str
    properties: dict[str, str]
    version: str  # the DataVersion JSON the broker sent


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (MixAll.string2Properties for what brokers send: no escapes, no
    continuations); comments and blank lines skipped."""
    props = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def format_properties_text(props: dict[str, str]) -> str:
    """MixAll.properties2String: ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in props.items())


async def broker_addrs(
    client: AdminClient, broker_addr: str | None, cluster: str | None
) -> list[str]:
    """The one address given, or every broker (masters and slaves) of a cluster, as mqadmin's
    -b / -c (CommandUtil.fetchMasterAndSlaveAddrByClusterName).

    Raises:
        AdminError: neither or both given, or the cluster has no broker.
    """
    if (broker_addr is None) == (cluster is None):
        raise AdminError("give either a broker address (-b) or a cluster name (-c)")
    if broker_addr is not None:
        return [broker_addr]
    info = await client.cluster_info()
    if cluster not in info.clusters:
        known = ", ".join(sorted(info.clusters)) or "none"
        raise AdminError(f"no cluster named {cluster} (known: {known})")
    return [addr for name in info.broker_names(cluster)
            for _, addr in sorted(info.brokers.get(name, {}).items())]  # fmt: skip


async def get_broker_config(client: AdminClient, addr: str) -> BrokerSettings:
    resp = await client.call(addr, RequestCode.GET_BROKER_CONFIG)
    try:
        text = resp.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdminError(f"{addr} sent a config body that is not UTF-8") from exc
    return BrokerSettings(addr, parse_properties_text(text), resp.ext_fields.get("version", ""))


async def update_broker_config(client: AdminClient, addr: str, props: dict[str, str]) -> str:
    """Send the update; the broker's remark comes back ("" when it has none).

    Raises:
        AdminError: the broker refused (its code and remark say why).
    """
    if not props:
        raise AdminError("nothing to update: give at least one key=value")
    body = format_properties_text(props).encode()
    resp = await client.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
    return resp.remark or ""
