"""Snapshots of replication for admin and runtime info: plain values, read once, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SlaveConnectionState:
    """One slave connected to this master."""

    slave_address: str  # "ip:port" of the slave's end of the HA connection
    ack_offset: int  # the slave's last reported max CommitLog offset (-1: none yet)
    lag_bytes: int  # this master's max CommitLog offset minus ack_offset
    lag_seconds: float = 0.0  # how long the slave has lacked some byte this master has


@dataclass(frozen=True, slots=True)
class MasterReplicationState:
    ha_address: str  # the bound HA address ("" when not listening)
    max_offset: int  # this master's max CommitLog offset
    push_to_slave_max_offset: int  # the highest offset any slave has acknowledged
    connections: tuple[SlaveConnectionState, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class SlaveReplicationState:
    master_address: str  # the master's HA address followed ("" when none is known)
    connected: bool
    max_offset: int  # this slave's max CommitLog offset
    last_frame_ms: int  # when the last frame (heartbeats too) arrived, epoch ms; 0: never


@dataclass(frozen=True, slots=True)
class ReplicationState:
    """A broker's replication at one moment."""

    role: str  # brokerRole: ASYNC_MASTER, SYNC_MASTER or SLAVE
    serving: MasterReplicationState  # this broker's HA port and who follows it
    following: SlaveReplicationState | None  # a slave's master; None on a master
