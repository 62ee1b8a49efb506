"""The consumers' keyword arguments: one declaration (ConsumerConfig, PushConsumerConfig) behind
both constructors, typed for callers by the Options dicts, which must name the same fields."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import (
    ConsumeFromWhere,
    LitePullConsumer,
    MessageModel,
    PushConsumer,
    SessionCredentials,
    allocate_by_circle,
)
from pocketmq.client.consumer_config import (
    ConsumerConfig,
    ConsumerOptions,
    PushConsumerConfig,
    PushConsumerOptions,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.errors import ClientError

# Every setting both consumers took as a keyword argument before ConsumerConfig, with a value
# other than its default.
SHARED: dict[str, Any] = {
    "message_model": MessageModel.BROADCASTING,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    "consume_timestamp_ms": 1,
    "allocate": allocate_by_circle,
    "pull_batch_size": 7,
    "pull_threshold_for_queue": 3,
    "pull_threshold_size_for_queue_mib": 2,
    "rebalance_interval_s": 1.5,
    "persist_interval_s": 2.5,
    "broker_suspend_ms": 100,
    "pull_delay_on_exception_s": 0.5,
    "instance_name": "i1",
    "local_offset_dir": Path("offsets"),
    "credentials": SessionCredentials("AclKey01", "secret-01"),
}
PUSH_ONLY: dict[str, Any] = {
    "consume_concurrency": 2,
    "consume_batch_max_size": 3,
    "max_reconsume_times": 4,
    "resubmit_delay_s": 0.1,
    "await_termination_s": 0.2,
    "consume_timeout_min": 0.3,
    "orderly": True,
    "suspend_current_queue_time_ms": 5,
}


def _fields(cls: type[Any]) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_options_name_the_configs_fields() -> None:
    assert set(ConsumerOptions.__annotations__) == _fields(ConsumerConfig) == set(SHARED)
    assert set(PushConsumerOptions.__annotations__) == _fields(PushConsumerConfig)
    assert _fields(PushConsumerConfig) == set(SHARED) | set(PUSH_ONLY)


async def test_every_keyword_lands_in_the_config() -> None:
    instance = ClientInstance("127.0.0.1:9876", "10.0.0.1@test")
    push = PushConsumer("G", "127.0.0.1:9876", instance=instance, **SHARED, **PUSH_ONLY)
    assert dataclasses.asdict(push.config) == {**SHARED, **PUSH_ONLY}
    lite = LitePullConsumer("G", instance=instance, auto_commit=False, **SHARED)
    assert dataclasses.asdict(lite.config) == SHARED and not lite.auto_commit


async def test_defaults_and_refusals_are_unchanged() -> None:
    assert PushConsumer("G").config.pull_batch_size == 32
    assert LitePullConsumer("G").config.pull_batch_size == 10
    assert PushConsumer("G").config.max_reconsume == 16
    with pytest.raises(TypeError):
        LitePullConsumer("G", orderly=True)  # type: ignore[call-arg]
    with pytest.raises(ClientError, match="blank"):
        PushConsumer(" ")
    with pytest.raises(ClientError, match=">= 1"):
        PushConsumer("G", consume_concurrency=0)
