"""Dead-letter audit: what ended in the ``%DLQ%`` topics, why, and how often.

Reads every dead-letter topic in one batch (``topicPattern`` ``%DLQ%.*``) and joins each
dead letter with its original message by message id: a DLQ copy keeps the original's UNIQ_KEY,
and ORIGIN_MESSAGE_ID and RETRY_TOPIC name the original and its topic. The report gives, per
consumer group, original topic and reason, how many messages died and an example id:

- ``rejected without retry``: the consumer sent it straight to the DLQ (delay level -1, or an
  orderly consumer giving up);
- ``retries exhausted after N``: N redeliveries failed before the broker gave up;
- ``original expired``: the original is no longer in its topic (retention), so only the
  dead letter tells the story.

Start a broker first (``make run`` or ``pocketmq serve``), then:

    python examples/spark/dlq_audit.py --demo     # make some dead letters first, then audit
    python examples/spark/dlq_audit.py            # audit what the cluster has
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any


def demo(nameserver: str) -> None:
    """Payments, some poison (rejected at once) and some flaky (fail twice): dead letters."""
    from pocketmq.client import (
        BlockingProducer,
        BlockingPushConsumer,
        ConsumeContext,
        ConsumeFromWhere,
        ConsumeResult,
        MessageExt,
        message,
    )

    total, poison, flaky = 60, {7, 21, 42}, {5, 13}
    with BlockingProducer("payments-producer", nameserver) as producer:
        for i in range(total):
            kind = "poison" if i in poison else "flaky" if i in flaky else "ok"
            producer.send(message("payments", f"payment {i} {kind}", keys=f"p{i}", tags=kind))

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            if m.tags == "poison":
                ctx.delay_level = -1  # straight to the DLQ
                return ConsumeResult.RECONSUME_LATER
            if m.tags == "flaky":
                ctx.delay_level = 1  # retry in a second; max_reconsume_times=1 then DLQ
                return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        "payment-service",
        nameserver,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        max_reconsume_times=1,
    )
    consumer.subscribe("payments", "*")
    consumer.register_listener(listener)
    with consumer:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Every poison and flaky payment sent back for the last time is in the DLQ.
            if dead_letters(nameserver, "payment-service") >= len(poison) + len(flaky):
                break
            time.sleep(0.2)
    print(f"demo: {total} payments, {len(poison)} poison, {len(flaky)} flaky")


def dead_letters(nameserver: str, group: str) -> int:
    """How many messages the group's dead-letter topic holds (0 before its first)."""
    import asyncio

    from pocketmq.admin.client import AdminClient, AdminError
    from pocketmq.admin.topic_stats import topic_status

    async def count() -> int:
        async with AdminClient(nameserver) as admin:
            try:
                queues = await topic_status(admin, f"%DLQ%{group}")
            except AdminError:  # no route yet: the broker creates the topic with its first
                return 0
            return sum(q.max_offset - q.min_offset for q in queues)

    return asyncio.run(count())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nameserver", default="127.0.0.1:9876")
    parser.add_argument("--demo", action="store_true", help="make dead letters first")
    args = parser.parse_args()
    if args.demo:
        demo(args.nameserver)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pocketmq.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pocketmq-dlq-audit")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    pocketmq.spark.register(spark)

    def topics(**options: str) -> Any:
        reader = spark.read.format("pocketmq").option("nameserver", args.nameserver)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    dead = (
        topics(topicPattern="%DLQ%.*")
        .select(
            F.regexp_replace("topic", "^%DLQ%", "").alias("group"),
            F.coalesce(F.col("properties")["RETRY_TOPIC"], F.lit("?")).alias("origin_topic"),
            F.coalesce(F.col("properties")["ORIGIN_MESSAGE_ID"], "msg_id").alias("origin_id"),
            "reconsume_times",
            F.col("store_timestamp").alias("dead_at"),
        )
        .cache()
    )
    if dead.isEmpty():
        print("no dead letters")
        return
    origin_topics = [r.origin_topic for r in dead.select("origin_topic").distinct().collect()]
    origins = (
        topics(topic=",".join(t for t in origin_topics if t != "?")).select(
            F.col("topic").alias("origin_topic"),
            F.col("msg_id").alias("origin_id"),
            "tags",
            "keys",
            F.col("store_timestamp").alias("sent_at"),
        )
        if any(t != "?" for t in origin_topics)
        else None
    )
    joined = (
        dead.join(origins, ["origin_topic", "origin_id"], "left")
        if origins is not None
        else dead.withColumn("sent_at", F.lit(None).cast("timestamp"))
    )
    # A dead letter's reconsume_times is one more than the redeliveries its original had.
    retries = F.col("reconsume_times") - 1
    reason = (
        F.when(F.col("sent_at").isNull(), F.lit("original expired"))
        .when(retries <= 0, F.lit("rejected without retry"))
        .otherwise(F.concat(F.lit("retries exhausted after "), retries.cast("string")))
    )
    seconds_to_dlq = F.col("dead_at").cast("double") - F.col("sent_at").cast("double")
    report = (
        joined.withColumn("reason", reason)
        .groupBy("group", "origin_topic", "reason")
        .agg(
            F.count("*").alias("messages"),
            F.min("origin_id").alias("example_id"),
            F.round(F.avg(seconds_to_dlq), 1).alias("avg_seconds_to_dlq"),
        )
        .orderBy(F.desc("messages"))
    )
    report.show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
