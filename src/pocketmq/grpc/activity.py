"""What every group of gRPC activities shares: the broker it serves, the request checks
that several RPCs make (group, queue, long-polling time) and the task boundary of a unary
call. No RPC is served here.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from google.protobuf.duration_pb2 import Duration

from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import RequestError
from pocketmq.grpc import convert
from pocketmq.grpc.calls import Context
from pocketmq.grpc.convert import GrpcRequestError, SendLimits, status
from pocketmq.grpc.receipts import ReceiptRenewer
from pocketmq.grpc.settings import FIFO_RETRY_INTERVAL_MS, GroupPolicy
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.fields import (
    MAX_LONG_POLLING_MS,
    check_group,
    check_long_polling_ms,
    check_queue_id,
)
from pocketmq.protocol.names import FIRST_RETRY_DELAY_LEVEL
from pocketmq.store.config import parse_delay_levels

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

# A long-polling call answers this long before the client's deadline, so that the answer
# arrives in time.
DEADLINE_MARGIN_MS = 500

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Self = TypeVar("Self", bound="Activity")


def boundary(
    make_response: Callable[[pb.Status], Resp],
) -> Callable[
    [Callable[[Self, Req, Context], Awaitable[Resp]]],
    Callable[[Self, Req, Context], Awaitable[Resp]],
]:
    """A unary handler's task boundary: a refused request becomes its status, anything
    unexpected is logged with its traceback and becomes INTERNAL_SERVER_ERROR. With the
    metrics endpoint on, the call's latency is observed under its method's name."""

    def wrap(
        fn: Callable[[Self, Req, Context], Awaitable[Resp]],
    ) -> Callable[[Self, Req, Context], Awaitable[Resp]]:
        async def handler(self: Self, request: Req, context: Context) -> Resp:
            start = time.perf_counter()
            try:
                response = await fn(self, request, context)
            except RequestError as exc:
                response = make_response(convert.status_of_error(exc))
            except Exception as exc:
                log.exception("gRPC %s failed", fn.__name__)
                response = make_response(status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}"))
            if self.broker.metrics is not None:  # timed only while the endpoint is on
                ms = (time.perf_counter() - start) * 1000
                self.broker.rpc_latency.observe("grpc", fn.__name__, _status_code(response), ms)
            return response

        handler.__name__ = fn.__name__
        return handler

    return wrap


def _status_code(response: object) -> int:
    """The v2 status code of a unary answer (PullMessage's first one for its list)."""
    first = response[0] if isinstance(response, list) and response else response
    code = getattr(getattr(first, "status", None), "code", 0)
    return int(code)


@functools.lru_cache(maxsize=8)
def _retry_ladder(message_delay_level: str) -> tuple[int, ...]:
    """The 4.x retry ladder of a delay-level setting: level 3 (10 s) on. Cached, since every
    ReceiveMessage reads it and the setting changes only with the broker's config."""
    levels = parse_delay_levels(message_delay_level)
    return levels[FIRST_RETRY_DELAY_LEVEL - 1 :] or levels[-1:]


class Activity:
    def __init__(self, broker: Broker, host: str) -> None:
        self.broker = broker
        self.messaging = broker.messaging
        self.pop = broker.pop
        self.host = host
        self.port = 0  # set once the server is bound
        self._spread = itertools.count()
        self._send_limits: SendLimits | None = None
        self.renewer = ReceiptRenewer(
            broker.pop,
            broker.config.default_invisible_time_mills,
            broker.config.renew_ahead_time_millis,
            clock=broker.clock,
        )

    @property
    def _limits(self) -> SendLimits:
        """Read on every send: rebuilt only when an update of the config changed it."""
        size = self.broker.config.store.max_message_size
        if self._send_limits is None or self._send_limits.max_body_size != size:
            self._send_limits = SendLimits(max_body_size=size)
        return self._send_limits

    def _broker_pb(self) -> pb.Broker:
        return pb.Broker(
            name=self.broker.config.broker_name,
            id=self.broker.config.broker_id,
            endpoints=convert.endpoints(self.host, self.port),
        )

    def _group(self, group: str) -> SubscriptionGroupConfig:
        """The consumer group a request names.

        Raises:
            RequestError: ILLEGAL_CONSUMER_GROUP for a blank or invalid name,
                CONSUMER_GROUP_NOT_FOUND for an unknown group when groups are not auto-created.
        """
        return self.messaging.group(check_group(group))

    def _group_policy(self, group: str) -> GroupPolicy:
        """The consumer group's retry policy (see ``_group`` for the errors)."""
        cfg = self._group(group)
        if cfg.consume_message_orderly:
            intervals: tuple[int, ...] = (FIFO_RETRY_INTERVAL_MS,)
        else:
            intervals = _retry_ladder(self.broker.config.store.message_delay_level)
        return GroupPolicy(
            max_delivery_attempts=cfg.retry_max_times + 1,
            retry_intervals_ms=intervals,
            fifo=cfg.consume_message_orderly,
        )

    def _check_filters(self, subscription: pb.Subscription) -> None:
        """A consumer's filter expressions, checked when it announces them in its settings,
        so that a bad one is refused at subscription time, not only at each receive.

        Raises:
            GrpcRequestError: ILLEGAL_FILTER_EXPRESSION or UNSUPPORTED (convert.filter_refusals).
        """
        for entry in subscription.subscriptions:
            data = convert.subscription_data(entry.topic.name, entry.expression)
            with convert.filter_refusals():
                self.messaging.subscription(data)

    # ------------------------------------------------------------------ routes, clients

    def _queue(self, mq: pb.MessageQueue) -> tuple[TopicConfig, int]:
        """The topic config and queue id of a request's queue, which must be one of ours.

        Raises:
            GrpcRequestError: ILLEGAL_TOPIC or TOPIC_NOT_FOUND; BAD_REQUEST for another broker's
                queue or a queue id the topic does not have.
        """
        topic = convert.check_topic(mq.topic)
        cfg = self.messaging.topic(topic)
        name = self.broker.config.broker_name
        if mq.broker.name and mq.broker.name != name:
            raise GrpcRequestError(
                pb.BAD_REQUEST, f"the queue is on broker {mq.broker.name}, this is broker {name}"
            )
        return cfg, check_queue_id(mq.id, cfg.read_queue_nums, topic=topic)

    @staticmethod
    def _long_polling_ms(timeout: Duration | None, context: Context) -> int:
        """How long a request may wait for messages: what it asks for (until its deadline when
        it asks for nothing), at most fields.MAX_LONG_POLLING_MS and ending before the
        deadline."""
        remaining = context.time_remaining()
        left_ms = None if remaining is None else int(remaining * 1000) - DEADLINE_MARGIN_MS
        if timeout is not None:
            wait_ms = convert.duration_ms(timeout)
        else:
            wait_ms = MAX_LONG_POLLING_MS if left_ms is None else left_ms
        wait_ms = check_long_polling_ms(wait_ms, "long_polling_timeout")
        if left_ms is not None:
            wait_ms = min(wait_ms, left_ms)
        return max(wait_ms, 0)
