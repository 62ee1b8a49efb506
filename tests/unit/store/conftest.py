"""Fixtures for the store tests: stores opened under tmp_path (closed at teardown) and a fake
clock for store timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_helpers import StoreFactory, open_store, small_config

from pocketmq.clock import SYSTEM_CLOCK, Clock, FakeClock
from pocketmq.store.message_store import MessageStore


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_small(store_root: Path) -> Iterator[StoreFactory]:
    """open_small(clock=..., **config changes) -> an open store on store_root, on the system
    clock unless given one; closed at teardown."""
    opened: list[MessageStore] = []

    def factory(*, clock: Clock = SYSTEM_CLOCK, **changes: Any) -> MessageStore:
        store = open_store(small_config(store_root, **changes), clock)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def clock() -> FakeClock:
    """For ``open_small(clock=clock)``: store timestamps the test chooses."""
    return FakeClock(1_700_000_000_000)
