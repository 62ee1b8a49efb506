"""Replication of the CommitLog from a master to its slaves (RocketMQ 4.x's HA protocol):
``master.HAService`` serves the HA port, ``slave.HAClient`` follows a master, ``state`` holds
the snapshots admin reads."""

from pocketmq.store.ha.master import HAService
from pocketmq.store.ha.slave import HAClient
from pocketmq.store.ha.state import (
    MasterReplicationState,
    ReplicationState,
    SlaveConnectionState,
    SlaveReplicationState,
)

__all__ = [
    "HAClient",
    "HAService",
    "MasterReplicationState",
    "ReplicationState",
    "SlaveConnectionState",
    "SlaveReplicationState",
]
