"""The servers' garbage-collector settings (pocketmq.cli.servers.tune_gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from pocketmq.cli.servers import tune_gc
from pocketmq.protocol.batch import batch_messages, encode_batch_body
from pocketmq.protocol.message import Message, MessageConst, MessageExt


@pytest.fixture
def tuned() -> Iterator[None]:
    threshold = gc.get_threshold()
    tune_gc()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_batches_in_flight_start_no_collection(tuned: None) -> None:
    body = encode_batch_body(
        Message(topic="T", body=b"x" * 1024, properties={MessageConst.KEYS: f"k{i}"})
        for i in range(256)
    )
    base = MessageExt(topic="T", queue_id=0, body=b"")
    started: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(note)
    try:
        # The four batches of 256 a W1 producer keeps in flight, decoded as the broker does
        # (with CPython's threshold of 700, two collections walk them).
        in_flight = [batch_messages(base, body) for _ in range(4)]
    finally:
        gc.callbacks.remove(note)
    assert [len(batch) for batch in in_flight] == [256] * 4
    assert started == []
