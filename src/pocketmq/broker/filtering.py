"""Subscriptions compiled into the store's filters: the one place where a consumer's tag
expression or SQL92 selector becomes a ``MessageFilter`` (RocketMQ's FilterAPI.build,
ConsumerFilterManager.build and FilterFactory), for pulls over both protocols, POP receives,
heartbeats and CHECK_CLIENT_CONFIG. The messaging service adds the broker's rules
(``enablePropertyFilter``, the response codes). No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pocketmq.errors import RequestError
from pocketmq.filter import SqlFilterError, compile_sql92
from pocketmq.protocol.names import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    MATCH_ALL,
    SubscriptionData,
    TagExpressionError,
    parse_tag_expression,
)
from pocketmq.store.filter import MessageFilter, SqlFilter, TagFilter


class FilterNotSupported(RequestError):
    """A SQL92 subscription on a broker with ``enable_property_filter`` off (SYSTEM_ERROR, as
    RocketMQ answers); the gRPC edge answers UNSUPPORTED."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription as the broker filters with it."""

    data: SubscriptionData
    filter: MessageFilter | None  # None: every message
    # A TAG subscription's tag names: the store matches hashes only, so an edge that
    # delivers to clients which do not recheck (5.x) rechecks by name. None: no recheck.
    tags: frozenset[str] | None = None
    # Why the expression does not compile; a heartbeat's subscription is kept with it (a
    # pull that relies on it is refused), any other is refused at once.
    error: str | None = None

    @property
    def topic(self) -> str:
        return self.data.topic

    @property
    def sub_version(self) -> int:
        return self.data.sub_version

    @property
    def is_tag(self) -> bool:
        return self.data.is_tag


# A 4.x pull carries its subscription on every request: the same few are compiled again and
# again. Subscriptions are frozen, so one compiled object serves every request carrying it.
@lru_cache(maxsize=4096)
def compile_subscription(data: SubscriptionData) -> Subscription:
    """The filter of a subscription, compiled once per distinct subscription (and cached).

    A tag expression naming no tag (``"||"``) matches every message, as the remoting broker
    has always served it; an expression that does not compile, or an expression type other
    than TAG and SQL92, comes back with ``error`` set and no filter.
    """
    if data.is_tag:
        try:
            parsed = parse_tag_expression(data.expression)
        except TagExpressionError:
            parsed = MATCH_ALL
        tags = TagFilter.of(parsed)
        return Subscription(data, tags, None if tags is None else parsed.tags)
    if data.expression_type != EXPRESSION_TYPE_SQL92:
        return Subscription(
            data,
            None,
            error=f"expression type {data.expression_type!r} is not supported: "
            f"{EXPRESSION_TYPE_TAG} or {EXPRESSION_TYPE_SQL92}",
        )
    if not data.expression:
        # FilterAPI.build's refusal.
        return Subscription(data, None, error=f"Expression can't be null! {EXPRESSION_TYPE_SQL92}")
    try:
        return Subscription(data, SqlFilter(compile_sql92(data.expression)))
    except SqlFilterError as exc:
        return Subscription(data, None, error=str(exc))
