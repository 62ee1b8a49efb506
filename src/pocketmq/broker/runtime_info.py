"""GET_BROKER_RUNTIME_INFO (28): the broker's state as RocketMQ's KVTable, string values.

RocketMQ's keys where it has them (AdminBrokerProcessor.prepareRuntimeInfo and the store's
runtime info): ``commitLogMinOffset``, ``commitLogMaxOffset``, ``dispatchBehindBytes``,
``brokerActive``, ``brokerVersionDesc``/``brokerVersion`` (the version we report to clients),
``earliestMessageTimeStamp``, ``remainHowManyDataToFlush``, ``commitLogDiskRatio``; the
statistics' StoreStatsService and BrokerStats keys (``broker/stats.py``: ``putTps``,
``getTransferedTps``, ``getFoundTps``, ``getMissTps``, ``getTotalTps`` as "10 s, 1 min,
10 min" TPS, ``msgPutTotal*``/``msgGetTotal*``, ``bootTimestamp``, ``runtime``,
``putMessageTimesTotal``, ...); the names of its HA runtime info for the rest (``inSyncSlaveNums``,
``haMasterAddress``, per slave ``slaveAckOffset``). pocketmq adds, under its own names:

- ``brokerRole`` (the CURRENT role: ASYNC_MASTER, SYNC_MASTER or SLAVE), ``brokerId`` (the id it
  registers under: 0 while it is master), ``failoverEpoch`` (only with failover on);
- on a master, per connected slave, keyed by the slave's HA connection address as RocketMQ keys
  per-level values (``scheduleMessageOffset_<level>``): ``haSlaveAckOffset_<addr>``,
  ``haSlaveLagBytes_<addr>`` (this master's max offset minus the slave's ack) and
  ``haSlaveLagSeconds_<addr>`` (how long the slave has lacked some byte this master has);
- on a slave, ``haClientAddress`` (the local end of its HA connection: the ``<addr>`` its
  master reports it under) and ``haConnected``.

No I/O here: it reads the broker's in-memory state (the caller asks the disk how full it
is). RocketMQ's thread-pool queue keys are left out: pocketmq has no such pools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol.remoting import CURRENT_VERSION

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


# MQVersion.Version's names from V4_9_0 (ordinal 395) on, the range we may report.
_VERSION_NAMES = {395 + i: f"V4_9_{i}" for i in range(9)}


def runtime_info(broker: Broker, disk: tuple[int, int]) -> dict[str, str]:
    """The table, with ``disk`` the (used, total) bytes of the CommitLog's disk."""
    store = broker.store
    top = store.max_phy_offset()
    bottom = store.min_phy_offset()
    used, total = disk
    flushed = store.commitlog.mfq.flushed_where
    table: dict[str, str] = {
        **broker.stats.runtime_info(),
        "brokerVersionDesc": _VERSION_NAMES.get(CURRENT_VERSION, str(CURRENT_VERSION)),
        "brokerVersion": str(CURRENT_VERSION),
        "earliestMessageTimeStamp": str(earliest_message_ms(broker)),
        "remainHowManyDataToFlush": f"{max(top - flushed, 0)} B",
        "commitLogDiskRatio": repr(used / total if total else 0.0),
        "commitLogMinOffset": str(bottom),
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


def earliest_message_ms(broker: Broker) -> int:
    """When the oldest message in the CommitLog was stored (getEarliestMessageTime); -1 for an
    empty one."""
    store = broker.store
    bottom = store.min_phy_offset()
    if store.max_phy_offset() <= bottom:
        return -1
    return store.commitlog.store_timestamp_at(bottom)
