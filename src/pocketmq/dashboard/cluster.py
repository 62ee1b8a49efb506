"""The cluster page's data: brokers by cluster and name with their runtime info."""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.admin import AdminClient, AdminError
from pocketmq.protocol.codes import RequestCode


async def broker_runtime_info(admin: AdminClient, addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's KVTable as strings."""
    body = await admin.call_json(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    try:
        return {str(k): str(v) for k, v in body["table"].items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise AdminError(f"{addr} sent a bad runtime info body: {exc!r}") from exc


@dataclass(frozen=True, slots=True)
class BrokerView:
    cluster: str
    name: str
    broker_id: int
    addr: str
    info: dict[str, str]  # empty: the broker did not answer
    error: str = ""

    @property
    def role(self) -> str:
        if self.error:
            return "UNREACHABLE"
        # RocketMQ's own runtime info has no role key: its id says it.
        return self.info.get("brokerRole", "MASTER" if self.broker_id == 0 else "SLAVE")


async def brokers(admin: AdminClient) -> list[BrokerView]:
    cluster = await admin.cluster_info()
    views = []
    for cluster_name, names in sorted(cluster.clusters.items()):
        for name in names:
            for bid, addr in sorted(cluster.brokers.get(name, {}).items()):
                try:
                    info = await broker_runtime_info(admin, addr)
                    views.append(BrokerView(cluster_name, name, bid, addr, info))
                except AdminError as exc:
                    views.append(BrokerView(cluster_name, name, bid, addr, {}, str(exc)))
    return views
