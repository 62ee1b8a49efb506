"""The Spark data sources' throughput: rows/s for a write to a topic, a batch read of it, and a
scan of the broker's store directory, next to reading the same rows from Parquet in the same
run (Spark's own columnar reader: the ceiling for this machine and this Spark).

Starts ``pocketmq serve`` on free ports in a scratch directory and Spark in local[N] (2 by
default). Each read ends in Spark's ``noop`` sink, so every column of every row is produced
and nothing is written; each figure is the best of ``--repeat`` runs after one warm-up query.

    python bench/spark_bench.py [--count 100000] [--size 1024] [--queues 4] [--cores 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / "serve.ready"
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "pocketmq.cli", "serve", "--namesrv-port", "0",
         "--broker-port", "0", "--grpc-port", "0", "--store", str(workdir / "store"),
         "--ready-file", str(ready)],
        stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(
                f"pocketmq serve did not start:\n{(workdir / 'serve.log').read_text()}"
            )
        time.sleep(0.05)
    return proc, f"127.0.0.1:{json.loads(ready.read_text())['namesrv']}"


def best_of(repeat: int, run: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000, help="messages")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print one JSON line too")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pocketmq.spark

    workdir = Path(tempfile.mkdtemp(prefix="pocketmq-spark-bench-"))
    server, nameserver = start_server(workdir)
    spark = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("pocketmq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.cores))
        .config("spark.driver.memory", "2g")
        .config("spark.local.dir", str(workdir / "spark"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pocketmq.spark.register(spark)
    topic = "SparkBench"
    try:
        subprocess.run(
            [sys.executable, "-m", "pocketmq.cli", "admin", "-n", nameserver, "update-topic",
             "-t", topic, "-r", str(args.queues), "-w", str(args.queues)],
            check=True, capture_output=True,
        )  # fmt: skip
        pad = "x" * max(0, args.size - 12)
        body = F.concat(F.format_string("%012d", F.col("id")), F.lit(pad)).cast("binary")
        keys = F.concat(F.lit("k"), F.col("id").cast("string"))
        source = (
            spark.range(args.count, numPartitions=args.cores)
            .select(body.alias("body"), keys.alias("keys"), F.lit("TagA").alias("tags"))
            .cache()
        )
        source.count()

        def write() -> None:
            (
                source.write.format("pocketmq")
                .option("nameserver", nameserver)
                .option("topic", topic)
                .mode("append")
                .save()
            )

        # One warm-up write of a few rows starts the Python workers and creates nothing new.
        source.limit(10).write.format("pocketmq").option("nameserver", nameserver).option(
            "topic", topic
        ).mode("append").save()
        start = time.perf_counter()
        write()
        write_s = time.perf_counter() - start
        total = args.count + 10

        def topic_df() -> Any:
            return (
                spark.read.format("pocketmq")
                .option("nameserver", nameserver)
                .option("topic", topic)
                .load()
            )

        def store_df() -> Any:
            return (
                spark.read.format("pocketmq-store")
                .option("minPartitions", str(args.cores))
                .load(str(workdir / "store"))
            )

        parquet_dir = workdir / "parquet"
        topic_df().write.parquet(str(parquet_dir))

        def noop(df_fn: Callable[[], Any]) -> Callable[[], None]:
            return lambda: df_fn().write.format("noop").mode("overwrite").save()

        assert topic_df().count() == total
        assert store_df().where(f"topic = '{topic}'").count() == total
        assert spark.read.parquet(str(parquet_dir)).count() == total
        read_s = best_of(args.repeat, noop(topic_df))
        store_s = best_of(args.repeat, noop(store_df))
        store_rows = store_df().count()
        parquet_s = best_of(args.repeat, noop(lambda: spark.read.parquet(str(parquet_dir))))

        mb = total * args.size / 1e6
        rows = [
            ("write (pocketmq)", args.count, write_s),
            ("batch read (pocketmq)", total, read_s),
            ("store scan (pocketmq-store)", store_rows, store_s),
            ("Parquet read (same rows)", total, parquet_s),
        ]
        print(
            f"{args.count:,} messages of {args.size} B, {args.queues} queues, "
            f"Spark local[{args.cores}], pyspark {spark.version}"
        )
        print(f"{'run':<28} {'rows':>9} {'s':>7} {'rows/s':>10} {'MB/s':>7} {'vs Parquet':>10}")
        parquet_rate = total / parquet_s
        result = {}
        for name, n, secs in rows:
            rate = n / secs
            result[name] = round(rate)
            print(
                f"{name:<28} {n:>9,} {secs:>7.2f} {rate:>10,.0f} {mb * n / total / secs:>7.1f} "
                f"{rate / parquet_rate:>10.2f}"
            )
        if args.json:
            print(json.dumps(result))
    finally:
        spark.stop()
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
