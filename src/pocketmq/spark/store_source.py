"""The ``pocketmq-store`` data source: ``spark.read.format("pocketmq-store").load(DIR)``.

Batch only. Each partition is a byte range of one CommitLog segment (see store_reader), so a
store is read in parallel without a broker: offline audit, replay and analytics of a broker's
data, or of a RocketMQ store. The rows are those of ``format("pocketmq")`` plus ``phy_offset``
and ``sys_flag``; ``broker`` comes from option ``broker`` (a record does not name its broker).
Every record is a row, including those no consume queue serves (prepared transaction halves,
delayed messages still in SCHEDULE_TOPIC_XXXX).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pocketmq.spark.base import NamedSource, RangeReading
from pocketmq.spark.options import StoreReadOptions, store_read_options
from pocketmq.spark.rows import STORE_SCHEMA
from pocketmq.spark.store_reader import FileRange, plan, read_file_range


class PocketMQStoreDataSource(NamedSource):
    format_name = "pocketmq-store"
    row_schema = STORE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return PocketMQStoreReader(store_read_options(self.options))


class PocketMQStoreReader(RangeReading[FileRange], DataSourceReader):
    def __init__(self, opts: StoreReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """Raises: ConfigError: the directory holds no CommitLog."""
        return [InputPartition(r) for r in plan(self.opts)]

    def read_planned(self, rng: FileRange) -> Iterator[pa.RecordBatch]:
        return read_file_range(rng, self.opts)
