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
from pocketmq.broker.subscription_groups import SubscriptionGroupManager
from pocketmq.broker.timer import TimerMessageService
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.broker.transaction import ProducerRegistry, TransactionService
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.store import MessageStore


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
        pull_hold=PullHold(),
        schedule=ScheduleMessageService(store, root / "delay.json", clock=clock),
        timer=TimerMessageService(store, root / "timer.json", 3 * 86400, clock=clock),
        producers=producers,
        transactions=TransactionService(store, offsets, topics, producers, config, clock=clock),
    )
    return MessagingService(broker)
