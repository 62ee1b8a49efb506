"""The two rules of failover, as pure functions: who may become master, and where a broker
that follows a new master must cut its log. No I/O here.

Why no acknowledged byte is lost. Each epoch has exactly one writer, its master, and every
byte of a log belongs to the epoch whose master wrote it at that offset; a slave only copies
its master's bytes to the same offsets. So two logs hold the same byte at an offset exactly when
their epoch histories give that offset the same epoch. Under SYNC_MASTER a put is acknowledged
only once every member of the epoch's sync-state set holds it, and the master removes a
lagging slave from the set in ZooKeeper *before* it acknowledges anything that slave lacks;
members are added only once they hold everything the master has. Hence, at every moment,
every acknowledged byte is on every broker the stored sync-state set names. A broker may
therefore become master only when:

1. no master holds the lease (the ephemeral ``master`` node is absent), and
2. it is in the sync-state set of the latest epoch E, and
3. its log agrees with the epoch history up to its end (``truncation_offset`` cuts nothing:
   it never wrote bytes of an epoch that the lineage does not have at those offsets), and
4. its max CommitLog offset is at least the start offset of E (a member whose store was wiped
   or lost its tail is refused, though the set still names it).

It then writes epoch E+1 starting at its own max offset; any other broker cuts its log where it
stops agreeing with the new history and copies the rest from the new master. Bytes a dead
master wrote but never acknowledged may be cut; acknowledged ones are on the new master.

Before the first election (no epoch yet) there is no sync-state set to ask: the live broker
with the largest max offset (the lowest id on a tie) becomes the first master, once it has been
registered for a session timeout (so that brokers started together all count).

What the rule rests on: members keep what they acknowledged (a process crash keeps the page
cache; a power cut keeps only what was flushed, so only SYNC_FLUSH members survive one).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from pocketmq.broker.failover.model import EpochEntry, LiveBroker, SyncStateSet


def latest_epoch(history: Sequence[EpochEntry]) -> EpochEntry:
    """The newest entry; epoch 0 at offset 0 for an empty history."""
    return history[-1] if history else EpochEntry(0, 0)


def epoch_at(history: Sequence[EpochEntry], phy_offset: int) -> int:
    """The epoch the byte at ``phy_offset`` belongs to: that of the last entry starting at or
    before it (an epoch that wrote nothing shares its start with the next: the next wins)."""
    starts = [e.start_offset for e in history]
    idx = bisect.bisect_right(starts, phy_offset)
    return history[idx - 1].epoch if idx else 0


def truncation_offset(
    local: Sequence[EpochEntry], local_max_offset: int, leader: Sequence[EpochEntry]
) -> int:
    """Where a log must be cut to follow a master: the start of the first range of the local
    log whose epoch the leader's history does not give it (``local_max_offset`` when the local
    log is a prefix of the leader's lineage and nothing is to be cut).

    The epochs of both histories change only at their entries' start offsets, so comparing the
    two at every start below ``local_max_offset`` (and at 0) finds the first disagreement.
    """
    breakpoints = sorted(
        {0}
        | {e.start_offset for e in local if e.start_offset < local_max_offset}
        | {e.start_offset for e in leader if e.start_offset < local_max_offset}
    )
    for offset in breakpoints:
        if offset >= local_max_offset:
            break
        if epoch_at(local, offset) != epoch_at(leader, offset):
            return offset
    return local_max_offset


def election_refusal(
    broker_id: int,
    local: Sequence[EpochEntry],
    local_max_offset: int,
    history: Sequence[EpochEntry],
    sync_state_set: SyncStateSet,
) -> str | None:
    """Why ``broker_id`` may not become master after the latest epoch of ``history`` (rules 2
    to 4 of the module docstring; the caller checks that no master holds the lease), or None
    when it may. Before the first election use ``bootstrap_master`` instead."""
    latest = latest_epoch(history)
    if sync_state_set.epoch != latest.epoch or broker_id not in sync_state_set.broker_ids:
        return (
            f"broker {broker_id} is not in the sync-state set of epoch {latest.epoch} "
            f"(epoch {sync_state_set.epoch}: {sorted(sync_state_set.broker_ids)})"
        )
    cut = truncation_offset(local, local_max_offset, history)
    if cut < local_max_offset:
        return (
            f"broker {broker_id}'s log leaves the epoch history at offset {cut} "
            f"(its end is {local_max_offset})"
        )
    if local_max_offset < latest.start_offset:
        return (
            f"broker {broker_id}'s log ends at {local_max_offset}, before epoch "
            f"{latest.epoch} starts ({latest.start_offset})"
        )
    return None


def bootstrap_master(live: Iterable[LiveBroker]) -> int | None:
    """The first master of a new broker set: the live broker with the most data."""
    best = min(live, key=lambda b: (-b.max_offset, b.broker_id), default=None)
    return best.broker_id if best is not None else None
