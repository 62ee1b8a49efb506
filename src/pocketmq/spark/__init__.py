"""PySpark data sources for pocketmq (Spark 4's Python Data Source API).

    import pocketmq.spark
    pocketmq.spark.register(spark)      # or spark.dataSource.register(PocketMQDataSource) ...

    df = (spark.read.format("pocketmq")
          .option("nameserver", "127.0.0.1:9876").option("topic", "TopicA").load())
    store = spark.read.format("pocketmq-store").load("/data/store")

``pocketmq`` reads topics in batch and as a stream and writes them; ``pocketmq-store`` scans a
store directory's CommitLog files. Needs ``pip install 'pocketmq[spark]'`` (pyspark 4, pyarrow).
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"pocketmq.spark needs pyspark 4 and pyarrow ({exc}); install them with "
        "pip install 'pocketmq[spark]'"
    ) from exc

from pocketmq.spark.rows import READ_SCHEMA, STORE_SCHEMA
from pocketmq.spark.source import PocketMQDataSource
from pocketmq.spark.store_source import PocketMQStoreDataSource


def register(spark: Any) -> None:
    """Register ``pocketmq`` and ``pocketmq-store`` with a SparkSession."""
    spark.dataSource.register(PocketMQDataSource)
    spark.dataSource.register(PocketMQStoreDataSource)


__all__ = [
    "READ_SCHEMA",
    "STORE_SCHEMA",
    "PocketMQDataSource",
    "PocketMQStoreDataSource",
    "register",
]
