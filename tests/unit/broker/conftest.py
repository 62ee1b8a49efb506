"""A fake clock, and a small real store on tmp_path stamping its records with it: what the
delay and timer tests drive time with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.clock import FakeClock
from pocketmq.store import MessageStore
from pocketmq.store.config import StoreConfig


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000_000)  # on a second: bucket boundaries are round numbers


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[MessageStore]:
    config = StoreConfig(
        store_path_root_dir=tmp_path / "store",
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 1000,
        max_hash_slot_num=64,
        max_index_num=256,
        clean_resource_interval=3_600_000,  # no retention while a test runs
    )
    s = MessageStore(config, clock=clock)
    s.open()
    try:
        yield s
    finally:
        s.close()
