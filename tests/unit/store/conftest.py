"""Fixtures for the store tests: stores opened under tmp_path (closed at teardown) and a
controllable clock for store timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_helpers import FakeClock, StoreFactory, open_store, small_config

from pocketmq.store import commitlog as commitlog_module
from pocketmq.store.message_store import MessageStore


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_small(store_root: Path) -> Iterator[StoreFactory]:
    """open_small(**config changes) -> an open store on store_root; closed at teardown."""
    opened: list[MessageStore] = []

    def factory(**changes: Any) -> MessageStore:
        store = open_store(small_config(store_root, **changes))
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Store timestamps come from clock.now_ms (the CommitLog reads time.time_ns)."""
    fake = FakeClock(1_700_000_000_000)
    monkeypatch.setattr(commitlog_module, "time", fake)
    return fake
