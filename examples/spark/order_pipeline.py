"""Order events -> per-minute revenue -> a results topic and Parquet files.

A Structured Streaming query reads JSON order events from the topic ``orders``, aggregates
them into one-minute event-time windows (with a two-minute watermark, so late orders still
count), and writes each closed window both to the topic ``order-stats`` (body: JSON, keys: the
window start) and to Parquet files. Offsets live in the checkpoint directory: stop the script
at any time and start it again, and no order is counted twice or missed.

Start a broker first (``make run`` or ``pocketmq serve``), then:

    python examples/spark/order_pipeline.py --generate 2000            # sample orders, then run
    python examples/spark/order_pipeline.py --follow                   # keep running
    python examples/spark/order_pipeline.py --out /tmp/orders-demo     # where files go

Without ``--follow`` the query processes what is in the topic and stops (Trigger.AvailableNow).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any


def generate(nameserver: str, count: int) -> None:
    """Sample orders with event times spread over the last ten minutes, in order."""
    from pocketmq.client import BlockingProducer, message

    now_ms = int(time.time() * 1000)
    start_ms = now_ms - 10 * 60 * 1000
    customers = [f"c{n:03d}" for n in range(50)]
    with BlockingProducer("order-generator", nameserver) as producer:
        for i in range(count):
            order_id = f"o{i:06d}"
            order = {
                "order_id": order_id,
                "customer": random.choice(customers),
                "amount": round(random.uniform(5, 250), 2),
                "ts": start_ms + i * (now_ms - start_ms) // count,
            }
            producer.send(message("orders", json.dumps(order), keys=order_id, tags="created"))
    print(f"sent {count} orders to topic orders")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nameserver", default="127.0.0.1:9876")
    parser.add_argument("--generate", type=int, default=0, help="send this many orders first")
    parser.add_argument("--follow", action="store_true", help="run until interrupted")
    parser.add_argument("--out", default="/tmp/pocketmq-orders", help="checkpoint and Parquet")
    args = parser.parse_args()
    if args.generate:
        generate(args.nameserver, args.generate)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pocketmq.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pocketmq-order-pipeline")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    pocketmq.spark.register(spark)

    schema = "order_id string, customer string, amount double, ts long"
    orders = (
        spark.readStream.format("pocketmq")
        .option("nameserver", args.nameserver)
        .option("topic", "orders")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
        .select(F.from_json(F.col("body").cast("string"), schema).alias("o"))
        .select("o.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    per_minute = (
        orders.withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "1 minute"))
        .agg(
            F.count("*").alias("orders"),
            F.round(F.sum("amount"), 2).alias("revenue"),
            F.approx_count_distinct("customer").alias("customers"),
        )
        .select(
            F.col("window.start").alias("minute"),
            "orders",
            "revenue",
            "customers",
        )
    )

    parquet_dir = f"{args.out}/order_stats_parquet"

    def publish(batch: Any, batch_id: int) -> None:
        # Parquet first, under the batch id: a batch replayed after a crash overwrites its own
        # directory instead of adding rows twice.
        batch.write.mode("overwrite").parquet(f"{parquet_dir}/batch={batch_id}")
        (
            batch.select(
                F.date_format("minute", "yyyy-MM-dd'T'HH:mm").alias("keys"),
                F.to_json(F.struct("minute", "orders", "revenue", "customers")).alias("body"),
                F.lit("per-minute").alias("tags"),
            )
            .write.format("pocketmq")
            .option("nameserver", args.nameserver)
            .option("topic", "order-stats")
            .mode("append")
            .save()
        )
        for row in batch.orderBy("minute").collect():
            print(f"  {row.minute:%H:%M}  {row.orders:5d} orders  {row.revenue:10.2f}")

    writer = (
        per_minute.writeStream.outputMode("append")
        .foreachBatch(publish)
        .option("checkpointLocation", f"{args.out}/checkpoint")
    )
    writer = (
        writer.trigger(processingTime="10 seconds")
        if args.follow
        else writer.trigger(availableNow=True)
    )
    query = writer.start()
    query.awaitTermination()
    total = spark.read.parquet(parquet_dir) if os.path.isdir(parquet_dir) else None
    if total is not None:
        print(f"closed windows so far: {total.count()} (Parquet in {parquet_dir})")
    spark.stop()


if __name__ == "__main__":
    main()
