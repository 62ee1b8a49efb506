"""The server's answer to a client's Telemetry settings. No I/O here.

The 5.x clients obey this reply rather than their own defaults: the producer takes its body
size limit, message type validation and retry policy from ``publishing`` and
``backoff_policy`` (without ``publishing`` the 5.1.2 client refuses every send with "max
size=0 bytes"); consumers take the long polling timeout, FIFO flag, batch size and retry
schedule from ``subscription`` and ``backoff_policy``. The reply echoes the client's own
settings (client type, access point, user agent, topics, subscriptions) around these values.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration

from pocketmq.grpc.v2 import definition_pb2 as pb

# RocketMQ proxy's defaults for producers: three attempts, 10 ms doubling up to 1 s.
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
# How many messages a push consumer asks for in one ReceiveMessage (the proxy's default).
RECEIVE_BATCH_SIZE = 32
# How long a push consumer's ReceiveMessage may be held on the broker; simple consumers send
# their own (their await duration).
PUSH_LONG_POLLING_TIMEOUT_MS = 20_000
# FIFO groups retry at a fixed interval (the retry seed), as 4.x orderly consumers suspend a
# queue for suspendCurrentQueueTimeMillis (1 s) before trying again.
FIFO_RETRY_INTERVAL_MS = 1_000


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """What the broker knows of a consumer group that its clients must follow."""

    # Deliveries of a message before it goes to the dead-letter queue (retryMaxTimes + 1).
    max_delivery_attempts: int
    # The wait before each redelivery, the last one repeated: the delay-level ladder, or one
    # fixed interval for FIFO groups.
    retry_intervals_ms: tuple[int, ...]
    fifo: bool = False


def duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def producer_backoff() -> pb.RetryPolicy:
    return pb.RetryPolicy(
        max_attempts=PRODUCER_MAX_ATTEMPTS,
        exponential_backoff=pb.ExponentialBackoff(
            initial=duration(PRODUCER_BACKOFF_INITIAL_MS),
            max=duration(PRODUCER_BACKOFF_MAX_MS),
            multiplier=PRODUCER_BACKOFF_MULTIPLIER,
        ),
    )


def consumer_backoff(policy: GroupPolicy) -> pb.RetryPolicy:
    # The 5.1.2 client honours only customized_backoff: it replaces an exponential one with its
    # own default (CLIENT_TRACES.md), so the ladder is sent step by step.
    return pb.RetryPolicy(
        max_attempts=policy.max_delivery_attempts,
        customized_backoff=pb.CustomizedBackoff(
            next=[duration(ms) for ms in policy.retry_intervals_ms]
        ),
    )


def settings_reply(
    client: pb.Settings, *, max_body_size: int, group: GroupPolicy | None
) -> pb.Settings:
    """The settings a client must use.

    Args:
        client: the settings the client announced.
        max_body_size: the largest body the broker stores, in bytes.
        group: the policy of the client's consumer group; None for producers.

    Returns:
        The reply, or settings without pub/sub when the client type needs none of ours
        (the caller answers UNRECOGNIZED_CLIENT_TYPE for those).
    """
    reply = pb.Settings()
    reply.CopyFrom(client)
    reply.metric.CopyFrom(pb.Metric(on=False))
    if client.client_type == pb.PRODUCER:
        reply.publishing.max_body_size = max_body_size
        reply.publishing.validate_message_type = True
        reply.backoff_policy.CopyFrom(producer_backoff())
    elif client.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER) and group is not None:
        sub = reply.subscription
        sub.fifo = group.fifo
        sub.receive_batch_size = RECEIVE_BATCH_SIZE
        if client.client_type == pb.PUSH_CONSUMER:
            sub.long_polling_timeout.CopyFrom(duration(PUSH_LONG_POLLING_TIMEOUT_MS))
        reply.backoff_policy.CopyFrom(consumer_backoff(group))
    return reply
