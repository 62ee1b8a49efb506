"""Offset arithmetic of the ``pocketmq`` source: resolving start and end offsets per queue,
splitting ranges into partitions, rate limiting a micro-batch, and the offsets JSON kept in
Spark's checkpoint. Pure functions; no I/O here.

Streaming offsets are ``{topic: {broker: {queue_id: next_offset}}}`` with sorted keys, so that
equal offsets serialize to equal JSON (Spark compares them as strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pocketmq.errors import ConfigError
from pocketmq.spark.options import EARLIEST, LATEST

QueueKey = tuple[str, str, int]  # (topic, broker name, queue id)


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue as its broker reports it now: the address to pull from and its offsets."""

    addr: str
    min_offset: int  # the oldest offset still stored
    max_offset: int  # the offset the next message will get


def queue_name(key: QueueKey) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


def resolve(
    wanted: int, key: QueueKey, state: QueueState, *, fail_on_data_loss: bool, option: str
) -> int:
    """A concrete offset for EARLIEST, LATEST or an offset asked for.

    An offset below the queue's min offset has expired (retention); one above its max offset
    does not exist yet. With ``fail_on_data_loss`` the first raises, else it moves to the
    min offset; the second is always an error.

    Raises:
        ConfigError: the offset cannot be read.
    """
    if wanted == EARLIEST:
        return state.min_offset
    if wanted == LATEST:
        return state.max_offset
    if wanted < state.min_offset:
        if fail_on_data_loss:
            raise ConfigError(
                f"{option}: queue {queue_name(key)} offset {wanted} has expired, the queue "
                f"starts at {state.min_offset} now (messages {wanted}..{state.min_offset - 1} "
                "were removed by retention). Start at a later offset, or set option "
                "failOnDataLoss=false to skip what is gone."
            )
        return state.min_offset
    if wanted > state.max_offset:
        raise ConfigError(
            f"{option}: queue {queue_name(key)} offset {wanted} is beyond its end "
            f"({state.max_offset}, the next offset to be written)"
        )
    return wanted


def check_known_queues(
    named: Mapping[QueueKey, int], states: Mapping[QueueKey, QueueState], option: str
) -> None:
    """Raises: ConfigError: the offsets JSON names a broker or queue the topic does not have."""
    unknown = sorted(set(named) - set(states))
    if unknown:
        have = ", ".join(queue_name(k) for k in sorted(states)) or "none"
        raise ConfigError(
            f"option {option} names queue(s) "
            f"{', '.join(queue_name(k) for k in unknown)} that the topics do not have; "
            f"their queues are: {have}"
        )


def split_range(start: int, end: int, max_records: int) -> list[tuple[int, int]]:
    """[start, end) in consecutive pieces of at most max_records offsets."""
    return [(s, min(s + max_records, end)) for s in range(start, end, max_records)]


def rate_limit(
    start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_rows: int
) -> dict[QueueKey, int]:
    """End offsets reading at most max_rows messages, spread over the queues by backlog.

    Every queue with a backlog gets at least one message when max_rows allows it, so that a
    small queue is not starved by large ones; the rest is shared in proportion to the backlogs
    (largest remainders first, ties by queue order, so the answer is deterministic).
    """
    backlog = {k: max(0, latest[k] - start.get(k, latest[k])) for k in sorted(latest)}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = dict.fromkeys(backlog, 0)
    waiting = [k for k, n in backlog.items() if n > 0]
    budget = max_rows
    if budget >= len(waiting):
        for k in waiting:
            share[k] = 1
        budget -= len(waiting)
    rest = {k: backlog[k] - share[k] for k in waiting}
    rest_total = sum(rest.values())
    if budget > 0 and rest_total > 0:
        exact = {k: budget * n / rest_total for k, n in rest.items()}
        floors = {k: int(v) for k, v in exact.items()}
        left = budget - sum(floors.values())
        for k in sorted(exact, key=lambda k: (floors[k] - exact[k], k))[:left]:
            floors[k] += 1
        for k, n in floors.items():
            share[k] += min(n, rest[k])
    out = {}
    for k in latest:
        base = start.get(k, latest[k])
        out[k] = base + share[k] if backlog[k] > 0 else latest[k]
    return out


def to_json(offsets: Mapping[QueueKey, int]) -> dict[str, Any]:
    """{(topic, broker, qid): offset} -> {topic: {broker: {"qid": offset}}}, keys sorted."""
    out: dict[str, Any] = {}
    for (topic, broker, qid), offset in sorted(offsets.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = offset
    return out


def from_json(data: Any) -> dict[QueueKey, int]:
    """The inverse of to_json, for offsets read back from a checkpoint.

    Raises:
        ConfigError: the offsets are not in the form to_json writes.
    """
    out: dict[QueueKey, int] = {}
    try:
        for topic, brokers in data.items():
            for broker, queues in brokers.items():
                for qid, offset in queues.items():
                    out[(str(topic), str(broker), int(qid))] = int(offset)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"offsets {data!r} are not {{topic: {{broker: {{queue_id: offset}}}}}}: {exc}; was "
            "the checkpoint written by another source?"
        ) from None
    return out
