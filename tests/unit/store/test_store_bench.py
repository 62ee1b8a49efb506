"""``pocketmq store bench``: every message lands where it says, one or a batch per put."""

from __future__ import annotations

import asyncio
from pathlib import Path

from store_helpers import read_queue

from pocketmq.protocol.record_codec import decode_message
from pocketmq.store.bench import _CHUNK, bench_message, bench_topic, run_bench
from pocketmq.store.config import FlushDiskType, StoreConfig
from pocketmq.store.message_store import MessageStore


def test_batched_puts_land_each_batch_in_order_in_its_queue(tmp_path: Path) -> None:
    count, batch, topics, queues = 1000, 64, 2, 3
    result = asyncio.run(
        run_bench(tmp_path, count, 100, FlushDiskType.ASYNC_FLUSH, topics=topics,
                  queues=queues, batch=batch)
    )  # fmt: skip
    assert (result.acked, result.failed, result.batch) == (count, 0, batch)
    expected: dict[tuple[str, int], list[int]] = {}
    for i in range(count):
        expected.setdefault(bench_topic(i // batch, topics, queues), []).append(i)
    store = MessageStore(StoreConfig(store_path_root_dir=tmp_path))
    store.open()
    try:
        for (topic, queue_id), indexes in expected.items():
            got = [decode_message(raw) for raw in read_queue(store, topic, queue_id)]
            assert [m.body for m in got] == [
                bench_message(i, 100, topics, queues).body for i in indexes
            ]
            assert {m.queue_id for m in got} == {queue_id}
    finally:
        store.close()


def test_single_puts_across_the_generators_chunks_land_every_message(tmp_path: Path) -> None:
    count, topics, queues = 2 * _CHUNK + 5, 1, 2
    result = asyncio.run(
        run_bench(tmp_path, count, 16, FlushDiskType.ASYNC_FLUSH, writers=3, topics=topics,
                  queues=queues)
    )  # fmt: skip
    assert (result.acked, result.failed, result.batch) == (count, 0, 1)
    store = MessageStore(StoreConfig(store_path_root_dir=tmp_path))
    store.open()
    try:
        for queue_id in range(queues):
            got = [decode_message(raw).body for raw in read_queue(store, "BenchTopic0", queue_id)]
            assert got == [
                bench_message(i, 16, topics, queues).body for i in range(queue_id, count, queues)
            ]
    finally:
        store.close()
