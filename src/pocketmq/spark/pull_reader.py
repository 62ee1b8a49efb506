"""Reading one queue's offset range on an executor: pulls straight from the broker by offset.

The range [start, end) is cut into chunks of ``pull_batch_size`` offsets and up to
``pulls_in_flight`` chunks are pulled at once, then handed on in offset order, so a partition
is not bound by one round trip per 32 messages. A broker may answer a pull with fewer messages
than asked (it caps the bytes of an answer); the chunk then pulls again from where the answer
stopped. Nothing is committed: the pulls carry no commit flag.

An offset the broker no longer has (expired by retention, or a queue that was reset) is data
loss: with failOnDataLoss it fails the task with a message that says so, else the gap is
skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass

import pyarrow as pa  # type: ignore[import-untyped]

from pocketmq.client.instance import ClientInstance
from pocketmq.client.pull import PullStatus, Subscription, pull
from pocketmq.client.route import MessageQueue
from pocketmq.errors import ClientError
from pocketmq.protocol.message import MessageExt
from pocketmq.spark.cluster import new_instance, new_loop
from pocketmq.spark.options import ReadOptions
from pocketmq.spark.rows import BATCH_ROWS, RowBuffer


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets [start, end) of one queue, and where to pull them from. Pickled to executors."""

    topic: str
    broker: str
    addr: str
    queue_id: int
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id} [{self.start}, {self.end})"


class DataLossError(ClientError):
    """Offsets that were planned are gone from the broker."""


async def _pull_chunk(
    instance: ClientInstance, rng: QueueRange, opts: ReadOptions, lo: int, hi: int
) -> list[MessageExt]:
    """The messages of offsets [lo, hi), in order.

    Raises:
        DataLossError: some of them are gone and failOnDataLoss is set.
        ClientError, BrokerError, ConnectionError, TimeoutError: the pull failed.
    """
    mq = MessageQueue(rng.topic, rng.broker, rng.queue_id)
    sub = Subscription.parse(rng.topic, "*")
    out: list[MessageExt] = []
    offset = lo
    while offset < hi:
        res = await pull(
            instance,
            rng.addr,
            opts.consumer_group,
            mq,
            sub,
            offset,
            hi - offset,
            timeout_s=opts.timeout_ms / 1000,
        )
        if res.status is PullStatus.FOUND:
            out.extend(m for m in res.messages if m.queue_offset < hi)
        elif res.status is PullStatus.NO_MATCHED_MSG and res.next_begin_offset > offset:
            pass  # units whose records were removed: the broker skipped past them
        else:
            gone_to = res.next_begin_offset if res.next_begin_offset > offset else hi
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"queue {rng.topic}/{rng.broker}/{rng.queue_id}: offsets {offset}.."
                    f"{min(gone_to, hi) - 1} planned for this read are gone from broker "
                    f"{rng.broker} ({res.status.value}; the queue now holds "
                    f"{res.min_offset}..{res.max_offset - 1}), probably removed by retention. "
                    "Set option failOnDataLoss=false to skip them."
                )
            res.next_begin_offset = gone_to
        if res.next_begin_offset <= offset:
            raise ClientError(
                f"queue {rng} does not advance at offset {offset} ({res.status.value})"
            )
        offset = res.next_begin_offset
    return out


async def pull_range(
    instance: ClientInstance, rng: QueueRange, opts: ReadOptions
) -> AsyncGenerator[list[MessageExt], None]:
    """The range's messages, chunk after chunk, with up to pulls_in_flight pulls at once."""
    step = opts.pull_batch_size
    bounds = iter((lo, min(lo + step, rng.end)) for lo in range(rng.start, rng.end, step))
    pending: list[asyncio.Task[list[MessageExt]]] = []
    try:
        while True:
            while len(pending) < opts.pulls_in_flight:
                nxt = next(bounds, None)
                if nxt is None:
                    break
                pending.append(asyncio.ensure_future(_pull_chunk(instance, rng, opts, *nxt)))
            if not pending:
                return
            yield await pending.pop(0)
    finally:
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def read_range(rng: QueueRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The rows of a queue range as RecordBatches (the body of DataSourceReader.read).

    Runs its own event loop between the batches it yields: Spark iterates the generator from
    a plain thread, and a connection lives only as long as the read.
    """
    if rng.start >= rng.end:
        return
    loop = new_loop()
    instance = loop.run_until_complete(_new_instance(opts))
    chunks = pull_range(instance, rng, opts)
    buf = RowBuffer(include_properties=opts.include_properties, store_columns=False)
    try:
        while True:
            try:
                msgs = loop.run_until_complete(anext(chunks))
            except StopAsyncIteration:
                break
            for m in msgs:
                # pull() inflated the body and set msg_id to the UNIQ_KEY where there is one.
                buf.add(m, rng.topic, rng.broker, m.body)
            if len(buf) >= BATCH_ROWS:
                yield buf.flush()
        if len(buf):
            yield buf.flush()
    finally:
        loop.run_until_complete(chunks.aclose())
        loop.run_until_complete(instance.close())
        loop.close()


async def _new_instance(opts: ReadOptions) -> ClientInstance:
    return new_instance(opts.nameserver, opts.timeout_ms)
