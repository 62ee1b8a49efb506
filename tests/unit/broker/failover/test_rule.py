"""The epoch rules as pure functions: where a follower cuts its log, and who may be elected.
Table cases, then a simulation of writes, partial replication and failovers whose logs are
compared byte by byte against the rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.broker.failover.model import (
    EpochEntry,
    FailoverError,
    LiveBroker,
    SyncStateSet,
    decode_history,
    encode_history,
)
from pocketmq.broker.failover.rule import (
    bootstrap_master,
    election_refusal,
    epoch_at,
    truncation_offset,
)


def h(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(e, s) for e, s in pairs]


@pytest.mark.parametrize(
    ("local", "local_max", "leader", "cut"),
    [
        # Empty logs and pre-failover logs (epoch 0) agree with any lineage.
        (h(), 0, h((1, 0)), 0),
        (h(), 500, h((1, 300)), 300),  # bytes of epoch 0 the new master never had
        (h(), 200, h((1, 300)), 200),  # a prefix of epoch 0: nothing to cut
        # Same lineage, local behind or level: nothing to cut.
        (h((1, 0)), 100, h((1, 0), (2, 300)), 100),
        (h((1, 0), (2, 300)), 400, h((1, 0), (2, 300)), 400),
        (h((1, 0), (2, 300)), 300, h((1, 0), (2, 300), (3, 300)), 300),
        # The old master wrote on in epoch 2 after the new master's start: cut at epoch 3.
        (h((1, 0), (2, 300)), 450, h((1, 0), (2, 300), (3, 400)), 400),
        # An epoch the leader's lineage does not have at all (never replicated).
        (h((1, 0), (2, 300)), 450, h((1, 0), (3, 300)), 300),
        (h((1, 0), (2, 350)), 450, h((1, 0), (3, 300)), 300),
        # A diverged epoch 1 (the leader started epoch 1 elsewhere): only epoch 0 is shared.
        (h((1, 100)), 450, h((1, 200)), 100),
        # Epochs that wrote nothing share a start with the next one.
        (h((1, 0), (2, 100), (3, 100)), 150, h((1, 0), (2, 100), (3, 100), (4, 120)), 120),
        (h((1, 0), (2, 100)), 150, h((1, 0), (3, 100), (4, 100)), 100),
        # A local history that runs ahead of its own log (a slave adopted its master's).
        (h((1, 0), (2, 500)), 300, h((1, 0), (2, 500), (3, 700)), 300),
        (h((1, 0), (2, 500)), 300, h((1, 0), (3, 250)), 250),
    ],
)
def test_truncation_offset(
    local: list[EpochEntry], local_max: int, leader: list[EpochEntry], cut: int
) -> None:
    assert truncation_offset(local, local_max, leader) == cut


def test_epoch_at() -> None:
    history = h((1, 0), (2, 100), (3, 100), (4, 250))
    assert [epoch_at(history, o) for o in (0, 99, 100, 249, 250, 10**9)] == [1, 1, 3, 3, 4, 4]
    assert epoch_at(h((1, 50)), 10) == 0
    assert epoch_at([], 10) == 0


SSS = SyncStateSet(3, frozenset({1, 2}))
HISTORY = h((1, 0), (2, 100), (3, 400))


@pytest.mark.parametrize(
    ("broker_id", "local", "local_max", "sss", "refused"),
    [
        (1, HISTORY, 400, SSS, None),
        (2, HISTORY, 900, SSS, None),
        (3, HISTORY, 900, SSS, "not in the sync-state set of epoch 3"),
        (1, HISTORY, 900, SyncStateSet(2, frozenset({1, 2})), "not in the sync-state set"),
        (1, HISTORY, 399, SSS, "before epoch 3 starts (400)"),  # a member that lost its tail
        (1, h((1, 0), (2, 100), (3, 350)), 500, SSS, "leaves the epoch history at offset 350"),
    ],
)
def test_election_refusal(
    broker_id: int,
    local: list[EpochEntry],
    local_max: int,
    sss: SyncStateSet,
    refused: str | None,
) -> None:
    reason = election_refusal(broker_id, local, local_max, HISTORY, sss)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


def test_bootstrap_picks_the_most_data_then_the_lowest_id() -> None:
    live = [
        LiveBroker(3, "a", "b", 500),
        LiveBroker(2, "a", "b", 700),
        LiveBroker(1, "a", "b", 700),
    ]
    assert bootstrap_master(live) == 1
    assert bootstrap_master([]) is None


def test_history_codec_refuses_what_is_not_a_history() -> None:
    assert decode_history(encode_history(HISTORY)) == HISTORY
    for raw in (b"[[2, 0], [1, 5]]", b"[[1, 10], [2, 5]]", b"[[0, 0]]", b"{}", b"[[1]]", b"x"):
        with pytest.raises(FailoverError):
            decode_history(raw)


# --- simulation ---------------------------------------------------------------------------------
# Each log is a list of the epochs its bytes were written in (one element = one byte). A master
# appends bytes of its epoch; a slave copies a prefix of its master's log; a failover elects a
# broker that agrees with the lineage and holds the latest epoch's start (rules 3 and 4), which
# opens an epoch at its log's end, and every other broker cuts where truncation_offset says,
# then copies. The rule is right when the cut is exactly where the follower's log first
# differs from the new master's.

steps = st.lists(
    st.tuples(st.sampled_from(["write", "copy", "failover"]), st.integers(0, 2), st.integers(1, 5)),
    max_size=40,
)


def first_difference(log: list[int], master_log: list[int]) -> int:
    for i, epoch in enumerate(log):
        if i >= len(master_log) or master_log[i] != epoch:
            return i
    return len(log)


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_cut_is_where_the_logs_first_differ(steps: list[tuple[str, int, int]]) -> None:
    logs: list[list[int]] = [[0] * 3, [0] * 2, [0] * 4]  # pre-failover data, diverging tails
    local: list[list[EpochEntry]] = [[], [], []]
    history: list[EpochEntry] = []
    master = 2
    epoch = 0
    for action, broker, amount in steps:
        if action == "write" and epoch:
            logs[master].extend([epoch] * amount)
        elif action == "copy" and broker != master:
            mine, theirs = logs[broker], logs[master]
            assert theirs[: len(mine)] == mine  # followers hold a prefix of their master
            mine.extend(theirs[len(mine) : len(mine) + amount])
        elif action == "failover":
            # Rules 3 and 4 (the sync-state set is about acknowledgements, not consistency).
            size = len(logs[broker])
            if truncation_offset(local[broker], size, history) < size or (
                history and size < history[-1].start_offset
            ):
                continue
            epoch += 1
            master = broker
            history = [*history, EpochEntry(epoch, size)]
            local[master] = list(history)
            for other in range(3):
                if other == master:
                    continue
                cut = truncation_offset(local[other], len(logs[other]), history)
                assert cut == first_difference(logs[other], logs[master])
                del logs[other][cut:]
                local[other] = list(history)
