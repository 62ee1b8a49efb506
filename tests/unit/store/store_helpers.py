"""Helpers shared by the store tests: tiny segment sizes so that files roll, and puts run
through asyncio.run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.protocol.message import MessageExt
from pocketmq.store.config import StoreConfig
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetStatus, PutResult

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 4096,
    "mapped_file_size_consume_queue": 200,  # 10 units per file
    "max_hash_slot_num": 16,
    "max_index_num": 64,
    "max_message_size": 2000,
    # Retention only runs when a test calls it.
    "clean_resource_interval": 3_600_000,
}


# open_small(**config changes) -> an open store (the conftest fixture).
StoreFactory = Callable[..., MessageStore]


def small_config(root: Path, **changes: Any) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, **{**SMALL, **changes})


def open_store(config: StoreConfig, clock: Clock = SYSTEM_CLOCK) -> MessageStore:
    store = MessageStore(config, clock=clock)
    # The housekeeping thread checks the disk every second; keep the real disk out of it.
    store.disk_usage = lambda _path: (10, 100)
    store.open()
    return store


def segment_paths(root: Path) -> list[Path]:
    """The CommitLog segments holding data, oldest first.

    While a store is open, its prefault thread may already have created the next segment; that
    one is all zeros (never written) and is left out.
    """
    paths = sorted((root / "commitlog").iterdir())
    if len(paths) > 1 and paths[-1].read_bytes().count(0) == paths[-1].stat().st_size:
        paths.pop()
    return paths


def msg(
    topic: str = "T",
    body: bytes = b"body",
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    **fields: Any,
) -> MessageExt:
    props: dict[str, str] = dict(fields.pop("properties", {}))
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    return MessageExt(topic=topic, body=body, queue_id=queue_id, properties=props, **fields)


def put(store: MessageStore, message: MessageExt) -> PutResult:
    return asyncio.run(store.put_message(message))


def put_batch(store: MessageStore, messages: list[MessageExt]) -> PutResult:
    return asyncio.run(store.put_messages(messages))


def put_ok(store: MessageStore, message: MessageExt) -> PutResult:
    result = put(store, message)
    assert result.ok, result
    return result


def read_queue(store: MessageStore, topic: str, queue_id: int, start: int = 0) -> list[bytes]:
    """Every record of a queue from start on, following next_begin_offset."""
    out: list[bytes] = []
    offset = start
    while True:
        got = store.get_message(topic, queue_id, offset, 1000)
        if got.status is not GetStatus.FOUND:
            return out
        out.extend(got.messages)
        offset = got.next_begin_offset


def mapping_vmas(mf: MappedFile) -> list[tuple[int, int, list[str]]]:
    """The VMAs of mf's mapping from /proc/self/smaps: [start, end) file positions (the end
    within the file: a last partial page) and each one's VmFlags, the kernel's own record of
    the madvise advice it was given. Skips the test where there is no smaps."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        pytest.skip("needs Linux's /proc/self/smaps")
    base, out = mf.address, []
    vma: tuple[int, int] | None = None
    for line in smaps.read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            vma = (lo, hi) if base <= lo < base + mf.file_size else None
        elif head == "VmFlags:" and vma is not None:
            out.append((vma[0] - base, min(vma[1] - base, mf.file_size), line.split()[1:]))
    return out
