"""The store append benchmark behind ``pocketmq store bench`` (also the crash tests' writer).

Appends ``count`` messages into a real store, with the same shape as client traffic (a unique
KEYS value, a TAGS value and a UNIQ_KEY per message, so every put also writes a consume-queue
unit and two index entries), then writes the same number of bytes to a plain file on the same
disk as the reference. Message ``i`` is fully determined by ``i`` (see ``bench_message``), so
whoever knows how many were acknowledged knows exactly what must be in the store.

With ``batch`` > 1 each put carries that many messages to one queue, as a producer's
``send_batch`` reaches the store (batch ``j`` goes where message ``j`` would go alone); those
messages are built before the clock starts, so the figure is the store's, not the generator's
(about 3 us a message, as much as a batched append itself). One-message puts take theirs from
chunks built as the writers reach them, the clock stopped meanwhile (all of them at once would
hold a crash test's first write back).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import record_length
from pocketmq.store.config import FlushDiskType, StoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import PutStatus

# How long a writer may run without letting the event loop (and the reporter) in.
_YIELD_EVERY_NS = 5_000_000
# Messages of one-message puts built at a time, off the clock.
_CHUNK = 4096


@dataclass
class BenchResult:
    count: int
    size: int
    flush: str
    writers: int
    batch: int  # messages per put
    acked: int
    failed: int
    elapsed_s: float  # first put to last acknowledgement
    close_s: float  # final flush and clean shutdown
    msgs_per_s: float
    mb_per_s: float  # CommitLog bytes per second, acknowledged
    durable_mb_per_s: float  # including the final flush
    raw_mb_per_s: float  # same bytes, plain sequential write + fsync
    ratio: float  # durable_mb_per_s / raw_mb_per_s
    # SYNC_FLUSH only (else 0): a plain file appended ``writers * batch`` records at a time, each
    # batch fdatasync'd - the most a group commit of that many writers can acknowledge.
    fsync_bound_msgs_per_s: float
    fsync_ratio: float  # msgs_per_s / fsync_bound_msgs_per_s
    put_p50_us: float  # one put: a message, or a batch
    put_p99_us: float
    first_error: str


def bench_topic(i: int, topics: int, queues: int) -> tuple[str, int]:
    slot = i % (topics * queues)
    return f"BenchTopic{slot // queues}", slot % queues


def bench_key(i: int) -> str:
    return f"bench-{i}"


def bench_body(i: int, size: int) -> bytes:
    stamp = i.to_bytes(8, "big")
    return (stamp * (size // 8 + 1))[:size]


def bench_message(
    i: int, size: int, topics: int, queues: int, slot: int | None = None
) -> MessageExt:
    """Message ``i``, sent where message ``slot`` (default ``i``) would go."""
    topic, queue_id = bench_topic(i if slot is None else slot, topics, queues)
    return MessageExt(
        topic=topic,
        queue_id=queue_id,
        body=bench_body(i, size),
        born_timestamp=int(time.time() * 1000),
        born_host=("127.0.0.1", 50000),
        properties={
            MessageConst.KEYS: bench_key(i),
            MessageConst.TAGS: f"tag{i % 8}",
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"7F000001C35A{i:020X}",
        },
    )


def _raw_write_mb_per_s(directory: Path, total_bytes: int) -> float:
    """Sequential write of total_bytes to a plain file, fsynced, in 1 MiB writes."""
    path = directory / "raw-write-reference.tmp"
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        left = total_bytes
        while left > 0:
            left -= os.write(fd, chunk[: min(left, len(chunk))])
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return total_bytes / elapsed / 1e6 if elapsed > 0 else 0.0


def _fsync_bound_msgs_per_s(directory: Path, record_bytes: int, batch: int) -> float:
    """Appends of ``batch`` records, each fdatasync'd before the next, to a plain file for about
    a second: messages per second when every batch waits for its own sync."""
    path = directory / "fsync-reference.tmp"
    chunk = os.urandom(record_bytes * batch)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        rounds = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < 1.0 or rounds < 20:
            os.write(fd, chunk)
            os.fdatasync(fd)
            rounds += 1
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return rounds * batch / elapsed


async def run_bench(
    directory: Path,
    count: int,
    size: int,
    flush: FlushDiskType,
    writers: int = 1,
    topics: int = 1,
    queues: int = 4,
    progress: Callable[[int], None] | None = None,
    config: StoreConfig | None = None,
    batch: int = 1,
) -> BenchResult:
    """Run the benchmark; progress(acked_prefix) is called at least every 100 ms."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    directory.mkdir(parents=True, exist_ok=True)
    cfg = (config or StoreConfig(store_path_root_dir=directory)).replace(
        store_path_root_dir=directory, flush_disk_type=flush
    )
    store = MessageStore(cfg)
    store.open()
    acked_flags = bytearray(count)
    prefix = 0
    failed = 0
    first_error = ""
    next_index = 0
    latencies: list[int] = []
    stop_reporting = asyncio.Event()
    last_yield_ns = time.perf_counter_ns()

    batches = (
        [
            [
                bench_message(i, size, topics, queues, j)
                for i in range(start, min(start + batch, count))
            ]
            for j, start in enumerate(range(0, count, batch))
        ]
        if batch > 1
        else []
    )

    chunk: list[MessageExt] = []
    chunk_start = 0
    building_ns = 0  # spent building chunks: not the store's time

    def single(i: int) -> list[MessageExt]:
        nonlocal chunk, chunk_start, building_ns
        if not chunk_start <= i < chunk_start + len(chunk):
            t0 = time.perf_counter_ns()
            chunk_start = i
            chunk = [
                bench_message(j, size, topics, queues) for j in range(i, min(i + _CHUNK, count))
            ]
            building_ns += time.perf_counter_ns() - t0
        return [chunk[i - chunk_start]]

    async def writer() -> None:
        nonlocal next_index, prefix, failed, first_error, last_yield_ns
        while next_index < count:
            i = next_index
            msgs = batches[i // batch] if batch > 1 else single(i)
            next_index += len(msgs)
            t0 = time.perf_counter_ns()
            result = await store.put_messages(msgs)
            t1 = time.perf_counter_ns()
            latencies.append(t1 - t0)
            if result.status is PutStatus.PUT_OK:
                acked_flags[i : i + len(msgs)] = b"\x01" * len(msgs)
                while prefix < count and acked_flags[prefix]:
                    prefix += 1
            else:
                failed += len(msgs)
                if not first_error:
                    first_error = f"{result.status.value}: {result.detail}"
                if result.status in (
                    PutStatus.SERVICE_NOT_AVAILABLE,
                    PutStatus.CREATE_MAPPED_FILE_FAILED,
                ):
                    next_index = count  # the store refuses writes: stop every writer
                    return
            if t1 - last_yield_ns >= _YIELD_EVERY_NS:
                # An ASYNC_FLUSH put returns without ever suspending, so a lone writer would
                # starve the progress reporter until the end: let the loop run now and then.
                last_yield_ns = t1
                await asyncio.sleep(0)

    async def reporter() -> None:
        assert progress is not None
        while not stop_reporting.is_set():
            progress(prefix)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_reporting.wait(), 0.05)
        progress(prefix)

    report_task = asyncio.create_task(reporter()) if progress is not None else None
    start = time.perf_counter()
    try:
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - start - building_ns / 1e9
    finally:
        stop_reporting.set()
        if report_task is not None:
            await report_task
        close_start = time.perf_counter()
        store.close()
        close_s = time.perf_counter() - close_start
    acked = int(sum(acked_flags))
    sample = bench_message(0, size, topics, queues)
    record = record_length(
        0, size, len(sample.topic), len(encode_properties(sample.properties).encode())
    )
    total_bytes = record * acked
    try:
        raw = _raw_write_mb_per_s(directory, max(total_bytes, 1 << 20))
    except OSError:
        # The reference write meets the same full disk (or file size limit) the store may
        # have met: report no reference rather than lose the result.
        raw = 0.0
    fsync_bound = 0.0
    if flush is FlushDiskType.SYNC_FLUSH:
        try:
            fsync_bound = _fsync_bound_msgs_per_s(directory, record, writers * batch)
        except OSError:  # as for the raw write: no reference rather than no result
            fsync_bound = 0.0
    latencies.sort()

    def pct(p: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(len(latencies) * p))] / 1000 if latencies else 0.0
        )

    durable = total_bytes / (elapsed + close_s) / 1e6 if elapsed + close_s > 0 else 0.0
    return BenchResult(
        count=count,
        size=size,
        flush=flush.value,
        writers=writers,
        batch=batch,
        acked=acked,
        failed=failed,
        elapsed_s=round(elapsed, 3),
        close_s=round(close_s, 3),
        msgs_per_s=round(acked / elapsed, 1) if elapsed > 0 else 0.0,
        mb_per_s=round(total_bytes / elapsed / 1e6, 2) if elapsed > 0 else 0.0,
        durable_mb_per_s=round(durable, 2),
        raw_mb_per_s=round(raw, 2),
        ratio=round(durable / raw, 3) if raw > 0 else 0.0,
        fsync_bound_msgs_per_s=round(fsync_bound, 1),
        fsync_ratio=round(acked / elapsed / fsync_bound, 3) if fsync_bound and elapsed else 0.0,
        put_p50_us=round(pct(0.50), 1),
        put_p99_us=round(pct(0.99), 1),
        first_error=first_error,
    )


def print_progress_line(acked: int) -> None:
    sys.stdout.write(orjson.dumps({"acked": acked}).decode() + "\n")
    sys.stdout.flush()


def result_json(result: BenchResult) -> str:
    return orjson.dumps(asdict(result)).decode()
