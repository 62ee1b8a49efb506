"""What the driver asks the cluster while planning: topic routes, each queue's min and max
offsets, and offsets by time. Runs a short-lived client per call (``asyncio.run``); nothing is
registered with a broker and no consumer offset is committed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from pocketmq.client.ids import client_id
from pocketmq.client.instance import ClientInstance
from pocketmq.client.route import TopicRoute
from pocketmq.errors import BrokerError, ClientError, ProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import MASTER_ID
from pocketmq.spark.offsets import QueueKey, QueueState

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh event loop (Spark calls us from plain threads)."""
    return asyncio.run(coro)


def new_loop() -> asyncio.AbstractEventLoop:
    """An event loop for a task to drive by hand (uvloop's when it is installed)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def new_instance(nameserver: str, timeout_ms: int) -> ClientInstance:
    """A client for requests only: its periodic route and heartbeat tasks are not started."""
    return ClientInstance(nameserver, client_id("pocketmq-spark"), rpc_timeout_s=timeout_ms / 1000)


def read_addr(route: TopicRoute, broker: str) -> str | None:
    """The master's address, else the replica with the lowest id (reads work on either)."""
    addrs = route.broker_addrs.get(broker, {})
    if MASTER_ID in addrs:
        return addrs[MASTER_ID]
    return addrs[min(addrs)] if addrs else None


async def routes(
    instance: ClientInstance, topics: Iterable[str], nameserver: str
) -> dict[str, TopicRoute]:
    """Each topic's route.

    Raises:
        ClientError: the NameServer is unreachable, or a topic does not exist.
    """
    out = {}
    for topic in topics:
        try:
            route = await instance.fetch_route(topic)
        except (ClientError, OSError) as exc:
            if isinstance(exc, ClientError) and "no NameServer reachable" not in str(exc):
                raise
            raise ClientError(
                f"cannot reach the NameServer at {nameserver!r} (option nameserver): "
                f"{exc}. Check the host and port, and that the NameServer is running."
            ) from exc
        if route is None or not route.read_queues:
            raise ClientError(
                f"topic {topic!r} does not exist on the NameServer at {nameserver} (option "
                f"topic); create it, e.g. `pocketmq admin -n {nameserver} update-topic -t "
                f"{topic}`, or check the name"
            )
        out[topic] = route
    return out


async def _offset(
    instance: ClientInstance, addr: str, code: int, key: QueueKey, **extra: Any
) -> int:
    fields: dict[str, Any] = {"topic": key[0], "queueId": key[2], **extra}
    try:
        resp = await instance.invoke(addr, code, fields)
    except (ConnectionError, TimeoutError, BrokerError) as exc:
        raise ClientError(
            f"broker {key[1]} at {addr} did not answer for queue {key[0]}/{key[1]}/{key[2]}: "
            f"{exc!r}"
        ) from exc
    return int(resp.ext_fields["offset"])


async def matching_topics(instance: ClientInstance, pattern: str, nameserver: str) -> list[str]:
    """The NameServer's topics whose whole name matches the regex.

    Raises:
        ClientError: the NameServer cannot be asked, or no topic matches.
    """
    try:
        resp = await instance.namesrv_invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
        every = [str(t) for t in json_body.loads(resp.body)["topicList"]]
    except (ClientError, OSError) as exc:
        raise ClientError(
            f"cannot reach the NameServer at {nameserver!r} (option nameserver): {exc}. "
            "Check the host and port, and that the NameServer is running."
        ) from exc
    except (ProtocolError, KeyError, TypeError) as exc:
        raise ClientError(f"malformed topic list from the NameServer at {nameserver}") from exc
    regex = re.compile(pattern)
    found = sorted(t for t in every if regex.fullmatch(t))
    if not found:
        raise ClientError(
            f"no topic on the NameServer at {nameserver} matches topicPattern {pattern!r}"
        )
    return found


async def queue_states(
    instance: ClientInstance, topics: Iterable[str], nameserver: str
) -> dict[QueueKey, QueueState]:
    """Every readable queue of the topics with its broker address and min/max offsets.

    Raises:
        ClientError: a NameServer or broker cannot be asked, or a topic does not exist.
    """
    found = await routes(instance, topics, nameserver)
    keys: list[tuple[QueueKey, str]] = []
    for topic, route in found.items():
        for mq in route.read_queues:
            addr = read_addr(route, mq.broker_name)
            if addr is None:
                raise ClientError(f"broker {mq.broker_name} of topic {topic} has no address")
            keys.append(((topic, mq.broker_name, mq.queue_id), addr))

    async def one(key: QueueKey, addr: str) -> tuple[QueueKey, QueueState]:
        lo, hi = await asyncio.gather(
            _offset(instance, addr, RequestCode.GET_MIN_OFFSET, key),
            _offset(instance, addr, RequestCode.GET_MAX_OFFSET, key),
        )
        return key, QueueState(addr, lo, hi)

    return dict(await asyncio.gather(*(one(k, a) for k, a in sorted(keys))))


async def offsets_at(
    instance: ClientInstance, states: dict[QueueKey, QueueState], timestamp_ms: int
) -> dict[QueueKey, int]:
    """Per queue, the first offset stored at or after timestamp_ms (its max offset if none).

    Raises:
        ClientError: a broker cannot be asked.
    """

    async def one(key: QueueKey, state: QueueState) -> tuple[QueueKey, int]:
        offset = await _offset(
            instance,
            state.addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            key,
            timestamp=timestamp_ms,
        )
        return key, offset

    return dict(await asyncio.gather(*(one(k, s) for k, s in sorted(states.items()))))


async def describe(
    nameserver: str,
    topics: Iterable[str],
    timeout_ms: int,
    timestamps: Iterable[int] = (),
    pattern: str | None = None,
) -> tuple[dict[QueueKey, QueueState], dict[int, dict[QueueKey, int]]]:
    """queue_states (of the topics, or of those matching pattern), plus offsets_at for each
    timestamp, with one client.

    Raises:
        ClientError: see queue_states and matching_topics.
    """
    instance = new_instance(nameserver, timeout_ms)
    try:
        if pattern is not None:
            topics = await matching_topics(instance, pattern, nameserver)
        states = await queue_states(instance, topics, nameserver)
        by_time = {ts: await offsets_at(instance, states, ts) for ts in timestamps}
        return states, by_time
    finally:
        await instance.close()
