"""Automatic failover of a master/slave broker set on ZooKeeper: leases, epochs, the
sync-state set and the election rule (RocketMQ 5's controller mode on an existing coordinator).
See coordinator.py for the moving parts and rule.py for the guarantee."""

from pocketmq.broker.failover.coordinator import (
    FailoverCoordinator,
    FailoverSettings,
    Role,
    RoleListener,
)
from pocketmq.broker.failover.model import (
    EpochEntry,
    FailoverError,
    MasterInfo,
    NotMasterError,
    SyncStateSet,
)
from pocketmq.broker.failover.rule import election_refusal, truncation_offset

__all__ = [
    "EpochEntry",
    "FailoverCoordinator",
    "FailoverError",
    "FailoverSettings",
    "MasterInfo",
    "NotMasterError",
    "Role",
    "RoleListener",
    "SyncStateSet",
    "election_refusal",
    "truncation_offset",
]
