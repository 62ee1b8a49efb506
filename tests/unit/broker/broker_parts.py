"""A messaging service over a real store and the broker's tables, without the broker's
server, NameServer registration or background loops; shared by the broker unit tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.locks import RebalanceLockManager
from pocketmq.broker.messaging import MessagingService
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pull_hold import PullHold
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.broker.subscription_groups import SubscriptionGroupManager
from pocketmq.broker.timer import TimerMessageService
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.broker.transaction import ProducerRegistry, TransactionService
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.store import MessageStore, StoreConfig


def messaging_for(
    root: Path,
    store: MessageStore,
    topics: TopicConfigManager,
    offsets: ConsumerOffsetManager,
    clock: Clock = SYSTEM_CLOCK,
) -> MessagingService:
    config = BrokerConfig(store=store.config)
    producers = ProducerRegistry(config.channel_expired_timeout, clock=clock)
    broker: Any = SimpleNamespace(
        config=config,
        clock=clock,
        store=store,
        topics=topics,
        offsets=offsets,
        subscription_groups=SubscriptionGroupManager(
            root / "groups.json", auto_create=True, clock=clock
        ),
        locks=RebalanceLockManager(clock=clock),
        stats=BrokerStatsManager(config.broker_cluster_name, clock),
        pull_hold=PullHold(),
        pop=SimpleNamespace(woken=0),  # no POP service: no pop is parked to be woken
        schedule=ScheduleMessageService(store, root / "delay.json", clock=clock),
        timer=TimerMessageService(store, root / "timer.json", 3 * 86400, clock=clock),
        producers=producers,
        transactions=TransactionService(store, offsets, topics, producers, config, clock=clock),
    )
    return MessagingService(broker)


def messaging_with_topic(
    root: Path, topic: str, queue_nums: int, clock: Clock = SYSTEM_CLOCK
) -> MessagingService:
    """A messaging service over a fresh store of 1 MiB commitlog segments in ``root``, with
    ``topic`` (``queue_nums`` queues, read-write) created; the caller closes its store."""
    store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20))
    store.open()
    topics = TopicConfigManager(
        root / "topics.json", cluster="C", broker_name="broker-a", auto_create=True,
        default_queue_nums=queue_nums,
    )  # fmt: skip
    topics.load()
    topics.create_system_if_absent(topic, queue_nums, PERM_READ_WRITE)
    return messaging_for(root, store, topics, ConsumerOffsetManager(root / "offsets.json"), clock)
