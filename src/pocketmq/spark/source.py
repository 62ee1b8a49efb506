"""The ``pocketmq`` data source: batch and streaming reads of topics, batch and streaming writes.

Planning runs on the driver (routes and offsets from the cluster, through pocketmq.client);
every partition is one queue's offset range, read on an executor by pulling from the broker.
Options and partitions are plain frozen dataclasses, so they pickle.

Streaming offsets are ``{topic: {broker: {queue_id: next_offset}}}`` and live in Spark's
checkpoint; the broker is told nothing (``commit`` is a no-op, no consumer group moves). A
micro-batch is a fixed offset range per queue, so a query restarted from its checkpoint reads
exactly the batches it had planned: with a sink idempotent on the batch id, nothing is lost or
repeated.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from pocketmq.errors import ConfigError
from pocketmq.spark import cluster
from pocketmq.spark.base import NamedSource, RangeReading
from pocketmq.spark.compat import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pocketmq.spark.offsets import (
    QueueKey,
    QueueState,
    check_known_queues,
    from_json,
    queue_name,
    rate_limit,
    resolve,
    split_range,
    to_json,
)
from pocketmq.spark.options import (
    OffsetSpec,
    ReadOptions,
    WriteOptions,
    read_options,
    write_options,
)
from pocketmq.spark.pull_reader import DataLossError, QueueRange, read_range
from pocketmq.spark.rows import READ_SCHEMA
from pocketmq.spark.writer import ColumnPlan, plan_columns, schema_fields, write_rows

log = logging.getLogger(__name__)


class PocketMQDataSource(NamedSource):
    """``spark.read.format("pocketmq")``, ``readStream``, ``write`` and ``writeStream``."""

    format_name = "pocketmq"
    row_schema = READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return PocketMQBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PocketMQStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = write_options(self.options)
        return PocketMQWriter(opts, plan_columns(schema_fields(schema), opts))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = write_options(self.options)
        return PocketMQStreamWriter(opts, plan_columns(schema_fields(schema), opts))


# ----------------------------------------------------------------------------- planning


def _start_offset(
    spec: OffsetSpec,
    key: QueueKey,
    state: QueueState,
    by_time: dict[int, dict[QueueKey, int]],
    opts: ReadOptions,
    option: str,
) -> int:
    wanted = by_time[spec.timestamp_ms][key] if spec.kind == "timestamp" else spec.for_queue(key)
    return resolve(wanted, key, state, fail_on_data_loss=opts.fail_on_data_loss, option=option)


def _describe(
    opts: ReadOptions, *specs: OffsetSpec
) -> tuple[dict[QueueKey, QueueState], dict[int, dict[QueueKey, int]]]:
    stamps = {s.timestamp_ms for s in specs if s.kind == "timestamp"}
    states, by_time = cluster.run(
        cluster.describe(
            opts.nameserver, opts.topics, opts.timeout_ms, sorted(stamps), opts.topic_pattern
        )
    )
    check_known_queues(opts.starting.per_queue, states, "startingOffsets")
    check_known_queues(opts.ending.per_queue, states, "endingOffsets")
    return states, by_time


def plan_ranges(
    starts: dict[QueueKey, int],
    ends: dict[QueueKey, int],
    addrs: dict[QueueKey, str],
    max_records: int,
) -> list[InputPartition]:
    """One partition per queue range, long ranges split; empty ranges are left out."""
    parts: list[InputPartition] = []
    for key in sorted(ends):
        start, end = starts[key], ends[key]
        for lo, hi in split_range(start, end, max_records):
            parts.append(InputPartition(QueueRange(key[0], key[1], addrs[key], key[2], lo, hi)))
    return parts


class _QueueRangeReading(RangeReading[QueueRange]):
    """Each partition is one queue's offset range, pulled from its broker."""

    opts: ReadOptions

    def read_planned(self, rng: QueueRange) -> Iterator[pa.RecordBatch]:
        return read_range(rng, self.opts)


class PocketMQBatchReader(_QueueRangeReading, DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """Raises: ConfigError, ClientError: the offsets cannot be resolved."""
        opts = self.opts
        states, by_time = _describe(opts, opts.starting, opts.ending)
        starts, ends = {}, {}
        for key, state in states.items():
            starts[key] = _start_offset(opts.starting, key, state, by_time, opts, "startingOffsets")
            ends[key] = _start_offset(opts.ending, key, state, by_time, opts, "endingOffsets")
            if ends[key] < starts[key]:
                if opts.ending.kind == "json" or opts.starting.kind == "json":
                    raise ConfigError(
                        f"queue {queue_name(key)}: endingOffsets ({ends[key]}) is before "
                        f"startingOffsets ({starts[key]})"
                    )
                ends[key] = starts[key]  # e.g. a start time later than the end time
        addrs = {k: s.addr for k, s in states.items()}
        return plan_ranges(starts, ends, addrs, opts.max_records_per_partition)


class PocketMQStreamReader(_QueueRangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the queues of the topics. Queues that appear later (a topic gets
    more queues, a broker joins) are read from their earliest offset, as Kafka's source reads
    new partitions."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._addrs: dict[QueueKey, str] = {}
        self._target: dict[QueueKey, int] | None = None  # Trigger.AvailableNow's end
        self._warned_no_limit = False

    def _states(self) -> dict[QueueKey, QueueState]:
        states, _ = _describe(self.opts)
        self._addrs.update((k, s.addr) for k, s in states.items())
        return states

    def initialOffset(self) -> dict[str, Any]:
        opts = self.opts
        states, by_time = _describe(opts, opts.starting)
        self._addrs.update((k, s.addr) for k, s in states.items())
        return to_json(
            {
                k: _start_offset(opts.starting, k, s, by_time, opts, "startingOffsets")
                for k, s in states.items()
            }
        )

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: s.max_offset for k, s in self._states().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        """The end of the next micro-batch: every queue's max offset, or less under
        maxOffsetsPerTrigger. pyspark before 4.2 calls this without arguments: then no
        limit applies (a warning says so if maxOffsetsPerTrigger is set).

        Raises:
            DataLossError: a queue's offset in ``start`` expired and failOnDataLoss is set.
        """
        states = self._states()
        begin = from_json(start) if start else {}
        latest: dict[QueueKey, int] = {}
        for key, state in states.items():
            end = state.max_offset
            if self._target is not None:
                end = min(end, self._target.get(key, begin.get(key, state.min_offset)))
            latest[key] = end
            self._check_loss(key, begin.get(key), state)
        base = {k: begin.get(k, states[k].min_offset) for k in latest}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(base, latest, limit.max_rows)
        elif limit is None and self.opts.max_offsets_per_trigger and not self._warned_no_limit:
            self._warned_no_limit = True
            log.warning(
                "maxOffsetsPerTrigger is ignored: this pyspark has no admission control for "
                "Python streaming sources (pyspark >= 4.2 has)"
            )
        merged = {**begin, **latest}  # queues that left the route keep their offsets
        if start and merged == begin:
            return start
        return to_json(merged)

    def _check_loss(self, key: QueueKey, offset: int | None, state: QueueState) -> None:
        if offset is None or not self.opts.fail_on_data_loss:
            return
        if offset < state.min_offset:
            raise DataLossError(
                f"queue {queue_name(key)}: the query's next offset {offset} has expired, the "
                f"queue starts at {state.min_offset} now (messages {offset}.."
                f"{state.min_offset - 1} were removed by retention before they were read). "
                "Set option failOnDataLoss=false to skip them."
            )
        if offset > state.max_offset:
            raise DataLossError(
                f"queue {queue_name(key)}: the query's next offset {offset} is beyond the "
                f"queue's end {state.max_offset}: the queue was reset (a new store?). Set "
                "option failOnDataLoss=false to read it again from its start."
            )

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json({k: s.max_offset for k, s in self._states().items()})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        if any(k not in self._addrs for k in stop):
            self._states()
        starts = {}
        for key, hi in stop.items():
            lo = begin.get(key, 0)  # a new queue: from its start
            if lo > hi:
                lo = 0  # the queue was reset (failOnDataLoss=false): read it from its start
            starts[key] = lo
        missing = sorted(k for k in stop if k not in self._addrs)
        if missing:
            raise ConfigError(
                f"queues {', '.join(queue_name(k) for k in missing)} of the checkpoint are not "
                "in the topics' routes any more"
            )
        return plan_ranges(starts, stop, self._addrs, self.opts.max_records_per_partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to tell the broker: the offsets live in Spark's checkpoint."""


# ----------------------------------------------------------------------------- writing


class PocketMQCommitMessage(WriterCommitMessage):
    def __init__(self, sent: int) -> None:
        self.sent = sent


class _RowSending:
    """Each task sends its rows through a producer of its own (writer.write_rows)."""

    def __init__(self, opts: WriteOptions, cols: ColumnPlan) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return PocketMQCommitMessage(write_rows(iterator, self.cols, self.opts))


class PocketMQWriter(_RowSending, DataSourceWriter):
    """``df.write.format("pocketmq")``."""


class PocketMQStreamWriter(_RowSending, DataSourceStreamWriter):
    """``df.writeStream.format("pocketmq")``: each micro-batch is sent as a batch write is."""
