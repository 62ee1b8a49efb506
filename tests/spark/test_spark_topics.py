"""Batch reads and writes of topics through Spark, store-directory reads, and the errors a
user sees for a wrong address, a missing topic or malformed offsets (Spark in local[1])."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from spark_helpers import Serve

from pocketmq.client import BlockingProducer, SendResult, message
from waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def produce(
    nameserver: str, topic: str, count: int, prefix: str = "m", **kw: Any
) -> list[SendResult]:
    with BlockingProducer("spark-test-producer", nameserver) as producer:
        return [
            producer.send(
                message(topic, f"{prefix}-{i}", tags=f"T{i % 3}", keys=f"k{i}",
                        properties={"n": str(i)}, **kw)
            )
            for i in range(count)
        ]  # fmt: skip


def read(spark: Any, nameserver: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("pocketmq").option("nameserver", nameserver).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.fixture(scope="module")
def sent(serve: Serve) -> list[SendResult]:
    return produce(serve.nameserver, "SparkRange", 40)


def test_batch_read_everything(spark: Any, serve: Serve, sent: list[SendResult]) -> None:
    rows = read(spark, serve.nameserver, "SparkRange").collect()
    assert len(rows) == 40
    by_id = {r.msg_id: r for r in rows}
    for i, res in enumerate(sent):
        row = by_id[res.msg_id]
        assert row.topic == "SparkRange"
        assert (row.broker, row.queue_id, row.queue_offset) == (
            res.message_queue.broker_name,
            res.message_queue.queue_id,
            res.queue_offset,
        )
        assert row.body == f"m-{i}".encode()
        assert (row.keys, row.tags) == (f"k{i}", f"T{i % 3}")
        assert row.properties["n"] == str(i)
        assert row.properties["UNIQ_KEY"] == res.msg_id
        assert row.store_timestamp >= row.born_timestamp.replace(microsecond=0)
        assert row.reconsume_times == 0


def test_batch_read_exact_offset_ranges(spark: Any, serve: Serve, sent: list[SendResult]) -> None:
    queues: dict[tuple[str, int], list[SendResult]] = {}
    for res in sent:
        queues.setdefault((res.message_queue.broker_name, res.message_queue.queue_id), []).append(
            res
        )
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    expected = set()
    for n, ((broker, qid), results) in enumerate(sorted(queues.items())):
        offsets = sorted(r.queue_offset for r in results)
        lo, hi = offsets[0] + 1, offsets[-1]  # leave out each queue's first and last
        if n == 0:
            lo = -2  # earliest
        if n == 1:
            hi = -1  # latest
        starting.setdefault(broker, {})[str(qid)] = lo
        ending.setdefault(broker, {})[str(qid)] = hi
        lo_n = offsets[0] if lo == -2 else lo
        hi_n = offsets[-1] + 1 if hi == -1 else hi
        expected |= {(qid, r.queue_offset) for r in results if lo_n <= r.queue_offset < hi_n}
    df = read(
        spark,
        serve.nameserver,
        "SparkRange",
        startingOffsets=json.dumps({"SparkRange": starting}),
        endingOffsets=json.dumps({"SparkRange": ending}),
        maxRecordsPerPartition="2",
    )
    got = [(r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect()]
    assert sorted(got) == sorted(expected)
    # Ranges longer than maxRecordsPerPartition are split; empty ones are left out.
    per_queue: dict[int, int] = {}
    for qid, _ in expected:
        per_queue[qid] = per_queue.get(qid, 0) + 1
    assert df.rdd.getNumPartitions() == sum((n + 1) // 2 for n in per_queue.values())


def later_millisecond() -> int:
    """Wait for the wall clock (the broker's too) to pass the current millisecond."""
    now_ms = int(time.time() * 1000)
    wait_until_sync(
        lambda: int(time.time() * 1000) > now_ms, 1, "the next millisecond", interval_s=0.001
    )
    return int(time.time() * 1000)


def test_batch_read_from_a_timestamp(spark: Any, serve: Serve) -> None:
    produce(serve.nameserver, "SparkTime", 10, prefix="before")
    cut = later_millisecond()  # after every "before" was stored
    later_millisecond()  # and every "after" is stored later than the cut
    produce(serve.nameserver, "SparkTime", 10, prefix="after")
    bodies = {
        r.body.decode()
        for r in read(spark, serve.nameserver, "SparkTime", startingTimestamp=str(cut)).collect()
    }
    assert bodies == {f"after-{i}" for i in range(10)}
    early = read(spark, serve.nameserver, "SparkTime", endingTimestamp=str(cut)).collect()
    assert {r.body.decode() for r in early} == {f"before-{i}" for i in range(10)}


def test_topic_pattern(spark: Any, serve: Serve, sent: list[SendResult]) -> None:
    produce(serve.nameserver, "SparkPatternB", 3)
    df = spark.read.format("pocketmq").option("nameserver", serve.nameserver)
    rows = df.option("topicPattern", "Spark(Range|PatternB)").load().collect()
    assert sorted({r.topic for r in rows}) == ["SparkPatternB", "SparkRange"]
    assert len(rows) == 43
    with pytest.raises(Exception, match=r"no topic on the NameServer at .* matches topicPattern"):
        df.option("topicPattern", "Nothing.*").load().collect()


def test_write_then_read_back(spark: Any, serve: Serve) -> None:
    from pyspark.sql import functions as F

    rows = [
        (f"body-{i}", f"key{i} other{i}", f"tag{i % 2}", {"seq": str(i), "UNIQ_KEY": "dropped"})
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows, "body string, keys string, tags string, properties map<string,string>"
    )
    (
        df.write.format("pocketmq")
        .option("nameserver", serve.nameserver)
        .option("topic", "SparkWritten")
        .option("batchSize", "32")
        .mode("append")
        .save()
    )
    back = read(spark, serve.nameserver, "SparkWritten").collect()
    assert len(back) == 300
    got = {r.body.decode(): r for r in back}
    for body, keys, tags, props in rows:
        row = got[body]
        assert (row.keys, row.tags, row.properties["seq"]) == (keys, tags, props["seq"])
        assert row.properties["UNIQ_KEY"] != "dropped"  # system properties are not user's
    assert len({r.msg_id for r in back}) == 300

    # A topic column, binary bodies and a delay level (1 = 1 s).
    delayed = spark.range(3).select(
        F.lit("SparkDelayed").alias("topic"),
        F.concat(F.lit("late-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.lit(1).alias("delay_level"),
    )
    sent_at = time.time()
    delayed.write.format("pocketmq").option("nameserver", serve.nameserver).mode("append").save()
    arrived: list[Any] = []

    def all_arrived() -> bool:
        try:
            arrived[:] = read(spark, serve.nameserver, "SparkDelayed").collect()
        except Exception as exc:  # the topic exists once the first delayed message is due
            assert "does not exist" in str(exc)
        return len(arrived) == 3

    wait_until_sync(all_arrived, 20, "the three delayed messages", interval_s=0.5)
    assert sorted(r.body for r in arrived) == [b"late-0", b"late-1", b"late-2"]
    assert min(r.store_timestamp.timestamp() for r in arrived) >= sent_at + 0.9


def test_stream_copies_a_topic_until_available_now(
    spark: Any, serve: Serve, sent: list[SendResult], tmp_path: Any
) -> None:
    query = (
        spark.readStream.format("pocketmq")
        .option("nameserver", serve.nameserver)
        .option("topic", "SparkRange")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .load()
        .selectExpr("body", "keys", "concat('copy-', tags) AS tags")
        .writeStream.format("pocketmq")
        .option("nameserver", serve.nameserver)
        .option("topic", "SparkCopied")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3  # 40 messages at most 15 per micro-batch
    copied = read(spark, serve.nameserver, "SparkCopied").collect()
    assert sorted(r.body for r in copied) == sorted(f"m-{i}".encode() for i in range(40))
    assert {r.tags for r in copied} == {"copy-T0", "copy-T1", "copy-T2"}


def test_write_needs_a_body_and_a_topic(spark: Any, serve: Serve) -> None:
    df = spark.createDataFrame([("x",)], "value string")
    writer = df.write.format("pocketmq").option("nameserver", serve.nameserver).mode("append")
    with pytest.raises(Exception, match="needs a body column"):
        writer.option("topic", "T").save()
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="needs a topic"):
        df.write.format("pocketmq").option("nameserver", serve.nameserver).mode("append").save()


def test_store_directory_read_equals_what_the_broker_serves(
    spark: Any, serve: Serve, sent: list[SendResult]
) -> None:
    # Enough bytes to fill several 256 KiB segments, so blank end-of-file records are crossed.
    with BlockingProducer("spark-test-producer", serve.nameserver) as producer:
        for i in range(400):
            producer.send(message("SparkStore", b"x" * (1000 + i) + str(i).encode(), keys=f"s{i}"))
    assert len(list((serve.store / "commitlog").iterdir())) >= 2
    cols = [
        "topic", "queue_id", "queue_offset", "msg_id", "keys", "tags", "body", "properties",
        "born_timestamp", "store_timestamp", "reconsume_times",
    ]  # fmt: skip
    for topic in ("SparkStore", "SparkRange"):
        served = read(spark, serve.nameserver, topic).select(*cols).collect()
        stored = (
            spark.read.format("pocketmq-store")
            .option("maxBytesPerPartition", str(64 * 1024))
            .load(str(serve.store))
            .where(f"topic = '{topic}'")
            .select(*cols)
            .collect()
        )
        key = lambda r: (r.queue_id, r.queue_offset)  # noqa: E731
        assert sorted(map(tuple, served), key=str) == sorted(map(tuple, stored), key=str)
        assert sorted(stored, key=key) == sorted(stored, key=key)
    # The commitlog directory itself works too; phy_offset and sys_flag come along.
    store = spark.read.format("pocketmq-store").load(str(serve.store / "commitlog"))
    first = store.orderBy("phy_offset").first()
    assert first.phy_offset == 0 and first.sys_flag is not None


def test_store_directory_read_skips_a_torn_tail(spark: Any, tmp_path: Any) -> None:
    from pocketmq.protocol.message import (
        MessageExt,
    )
    from pocketmq.protocol.record_codec import (
        encode_record,
    )

    commitlog = tmp_path / "commitlog"
    commitlog.mkdir()
    data = bytearray()
    for i in range(5):
        data += encode_record(
            MessageExt(topic="Torn", body=f"b{i}".encode(), queue_offset=i, phy_offset=len(data))
        )
    whole = len(data)
    data += encode_record(MessageExt(topic="Torn", body=b"cut", queue_offset=5, phy_offset=whole))
    data = data[: whole + 30] + bytes(1000)  # the last record cut short, then zeros
    (commitlog / f"{0:020d}").write_bytes(bytes(data))
    rows = spark.read.format("pocketmq-store").load(str(tmp_path)).collect()
    assert [r.body for r in sorted(rows, key=lambda r: r.phy_offset)] == [
        f"b{i}".encode() for i in range(5)
    ]


@pytest.fixture
def errors(spark: Any, serve: Serve) -> Iterator[Any]:
    def load_error(**options: str) -> str:
        reader = spark.read.format("pocketmq")
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception) as info:
            reader.load().collect()
        return str(info.value)

    yield load_error


def test_clear_errors(errors: Any, serve: Serve, sent: list[SendResult]) -> None:
    text = errors(nameserver="127.0.0.1:1", topic="SparkRange")
    assert "cannot reach the NameServer at '127.0.0.1:1' (option nameserver)" in text
    text = errors(nameserver="localhost", topic="SparkRange")
    assert "'localhost' is not host:port" in text
    text = errors(topic="SparkRange")
    assert "option nameserver is required" in text
    text = errors(nameserver=serve.nameserver, topic="NoSuchTopic")
    assert "topic 'NoSuchTopic' does not exist" in text
    text = errors(
        nameserver=serve.nameserver, topic="SparkRange", startingOffsets='{"SparkRange": {'
    )
    assert "option startingOffsets: malformed offsets JSON" in text
    text = errors(
        nameserver=serve.nameserver,
        topic="SparkRange",
        startingOffsets='{"SparkRange": {"no-such-broker": {"0": 1}}}',
    )
    assert "names queue(s) SparkRange/no-such-broker/0 that the topics do not have" in text
    text = errors(nameserver=serve.nameserver, topic="SparkRange", startingOffsets="first")
    assert "expected earliest, latest or JSON" in text
