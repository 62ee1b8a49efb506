"""GET_BROKER_RUNTIME_INFO (28): the broker's state as RocketMQ's KVTable, string values.

RocketMQ's keys where it has them (AdminBrokerProcessor.prepareRuntimeInfo and the store's
runtime info): ``commitLogMinOffset``, ``commitLogMaxOffset``, ``dispatchBehindBytes``,
``brokerActive``; the names of its HA runtime info for the rest (``inSyncSlaveNums``,
``haMasterAddress``, per slave ``slaveAckOffset``). pocketmq adds, under its own names:

- ``brokerRole`` (the CURRENT role: ASYNC_MASTER, SYNC_MASTER or SLAVE), ``brokerId`` (the id it
  registers under: 0 while it is master), ``failoverEpoch`` (only with failover on);
- on a master, per connected slave, keyed by the slave's HA connection address as RocketMQ keys
  per-level values (``scheduleMessageOffset_<level>``): ``haSlaveAckOffset_<addr>``,
  ``haSlaveLagBytes_<addr>`` (this master's max offset minus the slave's ack) and
  ``haSlaveLagSeconds_<addr>`` (how long the slave has lacked some byte this master has);
- on a slave, ``haClientAddress`` (the local end of its HA connection: the ``<addr>`` its
  master reports it under) and ``haConnected``.

No I/O here: it reads the broker's in-memory state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def runtime_info(broker: Broker) -> dict[str, str]:
    store = broker.store
    top = store.max_phy_offset()
    table: dict[str, str] = {
        "commitLogMinOffset": str(store.min_phy_offset()),
        "commitLogMaxOffset": str(top),
        "dispatchBehindBytes": str(max(0, top - store.reput.reput_from)),
        "brokerActive": str(broker.master_services_running).lower(),
        "brokerRole": store.role.value,
        "brokerId": str(broker.registered_id),
    }
    coordinator = broker.coordinator
    if coordinator is not None:
        table["failoverEpoch"] = str(coordinator.epoch)
    state = broker.replication_state()
    connections = state.serving.connections
    if broker.is_master:
        keeper = broker.role_switch.keeper if broker.role_switch is not None else None
        in_sync = len(keeper.confirmed) if keeper is not None else len(connections)
        table["inSyncSlaveNums"] = str(in_sync)
        for conn in connections:
            addr = conn.slave_address
            table[f"haSlaveAckOffset_{addr}"] = str(conn.ack_offset)
            table[f"haSlaveLagBytes_{addr}"] = str(conn.lag_bytes)
            table[f"haSlaveLagSeconds_{addr}"] = f"{conn.lag_seconds:.3f}"
    following = state.following
    client = broker.ha_client
    if following is not None and client is not None:
        table["haMasterAddress"] = following.master_address
        table["haConnected"] = str(following.connected).lower()
        table["haClientAddress"] = client.local_address
    return table
