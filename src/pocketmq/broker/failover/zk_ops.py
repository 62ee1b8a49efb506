"""The coordinator's ZooKeeper operations (model.py draws the nodes), as blocking kazoo calls.

Each function blocks its caller until ZooKeeper answers, so the coordinator runs them on a
worker thread (``asyncio.to_thread``), never on the event loop. Every change of the epoch and
of the sync-state set is one ZooKeeper transaction guarded by the versions read before it:
a concurrent change makes it fail whole, never half-applied.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)

from pocketmq.broker.failover import model
from pocketmq.broker.failover.model import EpochEntry, LiveBroker, MasterInfo, SyncStateSet, ZkPaths


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One read of a broker set's nodes, with the versions a transaction checks."""

    master: MasterInfo | None
    master_owner: int  # the session id holding the master node (0: none)
    master_version: int
    history: list[EpochEntry]
    epochs_version: int
    sync_state_set: SyncStateSet
    sss_version: int


@dataclass(frozen=True, slots=True)
class Lease:
    """What a master's later transactions check: its node and the epoch it was elected in."""

    master_version: int
    epochs_version: int
    sss_version: int


def ensure_layout(client: KazooClient, paths: ZkPaths) -> None:
    """Create the persistent nodes of a new broker set (racing creators are harmless)."""
    client.ensure_path(paths.brokers)
    initial = (
        (paths.epochs, model.encode_history([])),
        (paths.sync_state_set, model.encode_sync_state_set(SyncStateSet(0, frozenset()))),
    )
    for path, value in initial:
        with contextlib.suppress(NodeExistsError):
            client.create(path, value)


def read_state(client: KazooClient, paths: ZkPaths) -> ClusterState:
    """Raises model.FailoverError when a node holds something malformed."""
    try:
        raw, stat = client.get(paths.master)
        master: MasterInfo | None = model.decode_master(raw)
        owner, master_version = stat.ephemeralOwner, stat.version
    except NoNodeError:
        master, owner, master_version = None, 0, -1
    raw, epochs_stat = client.get(paths.epochs)
    history = model.decode_history(raw)
    raw, sss_stat = client.get(paths.sync_state_set)
    return ClusterState(
        master,
        owner,
        master_version,
        history,
        epochs_stat.version,
        model.decode_sync_state_set(raw),
        sss_stat.version,
    )


def _session_id(client: KazooClient) -> int | None:
    """The client's session id; None while it has none (dropped, being re-established)."""
    client_id = client.client_id
    return None if client_id is None else int(client_id[0])


def register(client: KazooClient, paths: ZkPaths, me: LiveBroker) -> None:
    """Publish this broker as live (its ephemeral node), replacing what a previous session of
    the same broker left there.

    Raises:
        ConnectionLoss: the session dropped meanwhile (the coordinator's next step retries).
    """
    path = paths.broker(me.broker_id)
    value = model.encode_live(me)
    session_id = _session_id(client)
    if session_id is None:
        raise ConnectionLoss("no ZooKeeper session to register this broker with")
    try:
        _, stat = client.get(path)
    except NoNodeError:
        stat = None
    if stat is not None and stat.ephemeralOwner == session_id:
        client.set(path, value, version=stat.version)
        return
    if stat is not None:
        with contextlib.suppress(NoNodeError):
            client.delete(path, version=stat.version)
    client.create(path, value, ephemeral=True)


def live_brokers(client: KazooClient, paths: ZkPaths) -> list[LiveBroker]:
    live = []
    for child in client.get_children(paths.brokers):
        if not child.isdigit():
            continue
        try:
            raw, _ = client.get(f"{paths.brokers}/{child}")
        except NoNodeError:
            continue
        live.append(model.decode_live(int(child), raw))
    return live


def _committed(results: list[Any]) -> bool:
    return not any(isinstance(r, Exception) for r in results)


def try_elect(
    client: KazooClient, paths: ZkPaths, state: ClusterState, me: MasterInfo, start_offset: int
) -> Lease | None:
    """Take the master node and open epoch ``me.epoch`` at ``start_offset`` with a sync-state
    set of this broker alone, in one transaction; None when another broker got there first or
    the epoch or the set changed since ``state`` was read."""
    history = [*state.history, EpochEntry(me.epoch, start_offset)]
    sss = SyncStateSet(me.epoch, frozenset({me.broker_id}))
    tx = client.transaction()
    tx.create(paths.master, model.encode_master(me), ephemeral=True)
    tx.set_data(paths.epochs, model.encode_history(history), version=state.epochs_version)
    tx.set_data(paths.sync_state_set, model.encode_sync_state_set(sss), version=state.sss_version)
    results = tx.commit()
    if not _committed(results):
        return None
    # A node just created is at version 0.
    return Lease(0, results[1].version, results[2].version)


def write_sync_state_set(
    client: KazooClient, paths: ZkPaths, lease: Lease, sss: SyncStateSet
) -> Lease:
    """Replace the sync-state set, if this broker still holds the master node and no newer
    epoch began since it was elected (both versions are checked in the same transaction).

    Raises:
        NotMasterError: the lease or the epoch is gone; nothing was written.
    """
    results = _write_sync_state_set(client, paths, lease, sss)
    if _only_the_set_moved(results):
        # The checks passed, so this broker still holds the lease of its epoch, and in an
        # epoch only its master writes the set: the newer version is a write of its own
        # whose answer was lost (a ConnectionLoss after the commit). Not a lost lease.
        _, stat = client.get(paths.sync_state_set)
        lease = Lease(lease.master_version, lease.epochs_version, stat.version)
        results = _write_sync_state_set(client, paths, lease, sss)
    if not _committed(results):
        raise model.NotMasterError(
            f"the sync-state set was not written: this broker is no longer the master of "
            f"epoch {sss.epoch} ({[type(r).__name__ for r in results]})"
        )
    return Lease(lease.master_version, lease.epochs_version, results[2].version)


def _write_sync_state_set(
    client: KazooClient, paths: ZkPaths, lease: Lease, sss: SyncStateSet
) -> list[Any]:
    tx = client.transaction()
    tx.check(paths.master, lease.master_version)
    tx.check(paths.epochs, lease.epochs_version)
    tx.set_data(paths.sync_state_set, model.encode_sync_state_set(sss), version=lease.sss_version)
    results: list[Any] = tx.commit()
    return results


def _only_the_set_moved(results: list[Any]) -> bool:
    """A failed write whose two checks held (ZooKeeper rolls back the operations before the
    failing one) and whose set_data met a newer version of the set."""
    return (
        isinstance(results[0], RolledBackError)
        and isinstance(results[1], RolledBackError)
        and isinstance(results[2], BadVersionError)
    )


def check_lease(client: KazooClient, paths: ZkPaths, lease: Lease, epoch: int) -> bool:
    """Whether this session still holds the master node of ``epoch``."""
    try:
        raw, stat = client.get(paths.master)
    except NoNodeError:
        return False
    # No session (it dropped meanwhile) holds no node.
    if stat.ephemeralOwner != _session_id(client) or stat.version != lease.master_version:
        return False
    try:
        return model.decode_master(raw).epoch == epoch
    except model.FailoverError:
        return False
