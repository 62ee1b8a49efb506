"""What the ``pocketmq`` and ``pocketmq-store`` data sources have in common: a source known by
a constant format name and row schema, and readers whose every partition carries one range
planned on the driver. No I/O here: each reader's ``read_planned`` does the reading.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import ClassVar, Generic, TypeVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSource, InputPartition

R = TypeVar("R")


class NamedSource(DataSource):
    """A data source whose format name and row schema are constants of its class."""

    format_name: ClassVar[str]
    row_schema: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def schema(self) -> str:
        return self.row_schema


class RangeReading(ABC, Generic[R]):
    """``read`` for a batch or stream reader whose partitions each hold one planned range."""

    @abstractmethod
    def read_planned(self, rng: R) -> Iterator[pa.RecordBatch]:
        """The rows of one range, as RecordBatches."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # With no range to read, Spark still runs one task, with InputPartition(None).
        rng: R | None = partition.value
        if rng is not None:
            yield from self.read_planned(rng)
