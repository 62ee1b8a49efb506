"""The consumers' settings (DefaultMQPushConsumer's and DefaultLitePullConsumer's fields).

``ConsumerConfig`` is what both consumers share: where a new queue starts, how queues are shared
in the group, how pulls are sized, throttled and timed, and where offsets are kept.
``PushConsumerConfig`` adds how the push consumer runs its listener. Each dataclass is the one
declaration of its settings, their defaults and meaning; the consumers take them as keyword
arguments (``ConsumerOptions`` / ``PushConsumerOptions`` type those for callers) and hold them
as ``consumer.config``. No I/O here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from pocketmq.client.allocate import AllocateStrategy, allocate_averagely
from pocketmq.protocol.acl_sign import SessionCredentials


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# RocketMQ's consumeTimestamp when none is given: half an hour before the queue is taken.
DEFAULT_CONSUME_BACK_MS = 30 * 60 * 1000
# RocketMQ's maxReconsumeTimes when the consumer sets none (-1).
DEFAULT_MAX_RECONSUME_TIMES = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    # CLUSTERING: the group shares the queues, offsets kept on the brokers; BROADCASTING: every
    # client takes every queue, offsets kept in a local file.
    message_model: MessageModel = MessageModel.CLUSTERING
    # Where a queue with no stored offset starts (a group's retry topic always starts at 0).
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # CONSUME_FROM_TIMESTAMP's time, epoch ms; None: DEFAULT_CONSUME_BACK_MS before the take.
    consume_timestamp_ms: int | None = None
    allocate: AllocateStrategy = allocate_averagely  # which queues this client takes
    pull_batch_size: int = 32  # messages asked for per pull (the lite consumer's default: 10)
    # Flow control: a queue's pulls pause while it holds this many unconsumed messages or MiB.
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    rebalance_interval_s: float = 20.0  # also at once when a broker says the group changed
    persist_interval_s: float = 5.0  # offsets are persisted this often and on shutdown
    broker_suspend_ms: int = 15000  # how long a broker holds a pull that found nothing
    pull_delay_on_exception_s: float = 3.0  # the pause after a failed pull
    instance_name: str | None = None  # the client id's suffix; None: pid and a clock reading
    local_offset_dir: Path | None = None  # BROADCASTING's offsets; None: ~/.rocketmq_offsets
    credentials: SessionCredentials | None = None  # ACL: every request signed with these

    @property
    def pull_threshold_size_bytes(self) -> int:
        return self.pull_threshold_size_for_queue_mib * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class PushConsumerConfig(ConsumerConfig):
    consume_concurrency: int = 20  # listener calls at once (a sync listener's thread pool)
    consume_batch_max_size: int = 1  # messages per listener call
    # Retries before the dead letter queue; -1: RocketMQ's 16 (orderly: retry for ever).
    max_reconsume_times: int = -1
    # A failed batch neither the broker nor the retry topic took is consumed again after this.
    resubmit_delay_s: float = 5.0
    await_termination_s: float = 5.0  # how long shutdown waits for listener calls under way
    consume_timeout_min: float = 15.0  # a listener call running longer counts as failed
    orderly: bool = False  # one batch at a time per queue, in order, under a broker lock
    suspend_current_queue_time_ms: int = 1000  # orderly: the pause before a failed batch again

    @property
    def max_reconsume(self) -> int:
        """The maximum sent to the broker with a failed message."""
        return (
            DEFAULT_MAX_RECONSUME_TIMES
            if self.max_reconsume_times == -1
            else self.max_reconsume_times
        )

    @property
    def consume_timeout_s(self) -> float:
        return self.consume_timeout_min * 60


class ConsumerOptions(TypedDict, total=False):
    """ConsumerConfig's fields as keyword arguments of the consumers' constructors."""

    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    consume_timestamp_ms: int | None
    allocate: AllocateStrategy
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue_mib: int
    rebalance_interval_s: float
    persist_interval_s: float
    broker_suspend_ms: int
    pull_delay_on_exception_s: float
    instance_name: str | None
    local_offset_dir: Path | None
    credentials: SessionCredentials | None


class PushConsumerOptions(ConsumerOptions, total=False):
    """PushConsumerConfig's own fields, as keyword arguments of PushConsumer."""

    consume_concurrency: int
    consume_batch_max_size: int
    max_reconsume_times: int
    resubmit_delay_s: float
    await_termination_s: float
    consume_timeout_min: float
    orderly: bool
    suspend_current_queue_time_ms: int
