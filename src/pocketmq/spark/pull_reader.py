"""Reading one queue's offset range on an executor: pulls straight from the broker by offset.

The range [start, end) is cut into chunks of ``pull_batch_size`` offsets and up to
``pulls_in_flight`` chunks are pulled at once, then handed on in offset order, so a partition
is not bound by one round trip per 32 messages. A broker may answer a pull with fewer messages
than asked (it caps the bytes of an answer); the chunk then pulls again from where the answer
stopped. Nothing is committed: the pulls carry no commit flag. Answers stay encoded until
RowBuffer.add_record decodes them straight into Arrow columns.

An offset the broker no longer has (expired by retention, or a queue that was reset) is data
loss: with failOnDataLoss it fails the task with a message that says so, else the gap is
skipped.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa  # type: ignore[import-untyped]

from pocketmq.client.instance import ClientInstance
from pocketmq.client.pull import PullStatus
from pocketmq.errors import ClientError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import PullSysFlag
from pocketmq.protocol.names import SUB_ALL
from pocketmq.protocol.record_codec import RecordError
from pocketmq.spark.cluster import new_instance, new_loop
from pocketmq.spark.options import ReadOptions
from pocketmq.spark.rows import BATCH_ROWS, RowBuffer
from pocketmq.tasks import cancel_and_wait


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


# PullMessageProcessor's answers, as pocketmq.client.pull maps them.
_PULL_STATUS: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class RawPull:
    """A pull answer with its records left encoded: the reader decodes them into columns."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes


async def pull_raw(
    instance: ClientInstance, rng: QueueRange, opts: ReadOptions, offset: int, max_nums: int
) -> RawPull:
    """One PULL_MESSAGE of every tag, without the commit flag (pocketmq.client.pull's request,
    minus decoding each record into a MessageExt).

    Raises:
        BrokerError: an error code (no topic, no permission, ...).
        ConnectionError, TimeoutError: no answer.
        ClientError: the answer lacks its offsets.
    """
    resp = await instance.invoke(
        rng.addr,
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": opts.consumer_group,
            "topic": rng.topic,
            "queueId": rng.queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": PullSysFlag.SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": SUB_ALL,
            "subVersion": 0,
            "expressionType": "TAG",
        },
        timeout_s=opts.timeout_ms / 1000,
        ok=tuple(_PULL_STATUS),
    )
    f = resp.ext_fields
    try:
        next_begin = int(f["nextBeginOffset"])
        min_offset, max_offset = int(f.get("minOffset", 0)), int(f.get("maxOffset", 0))
    except (KeyError, ValueError) as exc:
        raise ClientError(f"pull answer from {rng.addr} lacks offsets: {exc}") from exc
    status = _PULL_STATUS[resp.code]
    return RawPull(
        status, next_begin, min_offset, max_offset, resp.body if status is PullStatus.FOUND else b""
    )


async def _pull_chunk(
    instance: ClientInstance, rng: QueueRange, opts: ReadOptions, lo: int, hi: int
) -> list[bytes]:
    """The encoded records of offsets [lo, hi), as pull answers' bodies, in order.

    Raises:
        DataLossError: some of them are gone and failOnDataLoss is set.
        ClientError, BrokerError, ConnectionError, TimeoutError: the pull failed.
    """
    out: list[bytes] = []
    offset = lo
    while offset < hi:
        res = await pull_raw(instance, rng, opts, offset, hi - offset)
        if res.status is PullStatus.FOUND:
            out.append(res.body)
        elif res.status is PullStatus.NO_MATCHED_MSG and res.next_begin_offset > offset:
            pass  # units whose records were removed: the broker skipped past them
        else:
            gone_to = res.next_begin_offset if res.next_begin_offset > offset else hi
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"queue {rng.topic}/{rng.broker}/{rng.queue_id}: offsets {offset}.."
                    f"{min(gone_to, rng.end) - 1} planned for this read are gone from broker "
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
) -> AsyncGenerator[list[bytes], None]:
    """The range's pull answers, chunk after chunk, with up to pulls_in_flight pulls at once."""
    step = opts.pull_batch_size
    bounds = iter((lo, min(lo + step, rng.end)) for lo in range(rng.start, rng.end, step))
    pending: list[asyncio.Task[list[bytes]]] = []
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
        await cancel_and_wait(pending, ignore_errors=True)


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
                bodies = loop.run_until_complete(anext(chunks))
            except StopAsyncIteration:
                break
            for body in bodies:
                _add_records(buf, body, rng)
            if len(buf) >= BATCH_ROWS:
                yield buf.flush()
        if len(buf):
            yield buf.flush()
    finally:
        loop.run_until_complete(chunks.aclose())
        loop.run_until_complete(instance.close())
        loop.close()


def _add_records(buf: RowBuffer, body: bytes, rng: QueueRange) -> None:
    """Decode a pull answer's records; those past the range's end are left out.

    Raises:
        ClientError: the answer does not decode.
    """
    pos = 0
    while pos < len(body):
        try:
            size, _, queue_offset = buf.add_record(body, pos, len(body), rng.topic, rng.broker)
        except (RecordError, zlib.error, struct.error) as exc:
            raise ClientError(f"cannot decode the messages pulled from {rng}: {exc}") from exc
        if not rng.start <= queue_offset < rng.end:
            buf.truncate(len(buf) - 1)  # the row just added
        pos += size


async def _new_instance(opts: ReadOptions) -> ClientInstance:
    return new_instance(opts.nameserver, opts.timeout_ms)
