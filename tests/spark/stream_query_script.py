"""A streaming query for test_spark_streaming: pocketmq -> foreachBatch, one file per batch id.

    python stream_query_script.py NAMESERVER TOPIC CHECKPOINT_DIR OUT_DIR MAX_OFFSETS_PER_TRIGGER

The sink is idempotent on the batch id: batch N goes to OUT_DIR/batch-N.json (temp file and
rename). A batch Spark runs again after a restart goes to OUT_DIR/replay-N.json instead, so the
test can check that it holds the same messages. Each batch then lingers a second before Spark
commits it, which leaves the parent a window to SIGKILL the query mid-batch.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from spark_helpers import spark_conf


def main() -> None:
    nameserver, topic, checkpoint, out_dir, max_per_trigger = sys.argv[1:6]
    out = Path(out_dir)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import pocketmq.spark

    builder = SparkSession.builder.master("local[1]").appName("pocketmq-stream-test")
    for key, value in spark_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pocketmq.spark.register(spark)

    def sink(df: Any, batch_id: int) -> None:
        rows = [
            [r.broker, r.queue_id, r.queue_offset, r.msg_id, r.body.decode()]
            for r in df.select("broker", "queue_id", "queue_offset", "msg_id", "body").collect()
        ]
        rows.sort()
        name = f"batch-{batch_id:06d}.json"
        if (out / name).exists():
            name = f"replay-{batch_id:06d}.json"
        tmp = out / f".{name}.tmp"
        tmp.write_text(json.dumps(rows))
        tmp.rename(out / name)
        time.sleep(1.0)  # a slow sink: the test's kill lands between a batch and its commit

    query = (
        spark.readStream.format("pocketmq")
        .option("nameserver", nameserver)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_trigger)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    (out / "started").touch()
    query.awaitTermination()


if __name__ == "__main__":
    main()
