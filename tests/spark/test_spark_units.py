"""The pure parts of pocketmq.spark: options, offset arithmetic, write chunking and column
checks, store planning. No Spark session and no server."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pocketmq.errors import ConfigError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import encode_record
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.spark import pull_reader, source
from pocketmq.spark.compat import ReadAllAvailable, ReadMaxRows
from pocketmq.spark.offsets import (
    QueueState,
    check_known_queues,
    from_json,
    rate_limit,
    resolve,
    split_range,
    to_json,
)
from pocketmq.spark.options import (
    EARLIEST,
    LATEST,
    StoreReadOptions,
    WriteOptions,
    read_options,
    store_read_options,
)
from pocketmq.spark.pull_reader import DataLossError, QueueRange, pull_range
from pocketmq.spark.rows import RowBuffer
from pocketmq.spark.store_reader import plan, read_file_range
from pocketmq.spark.writer import chunks, plan_columns, to_message

NS = {"nameserver": "127.0.0.1:9876", "topic": "A"}


def test_read_options_defaults_and_parsing() -> None:
    batch = read_options(NS, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and batch.include_properties
    stream = read_options({**NS, "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert stream.starting.kind == "latest" and stream.max_offsets_per_trigger == 10
    spec = read_options(
        {**NS, "topic": "A, B", "startingoffsets": '{"A": {"b": {"0": 5, "1": -2}}}'},
        streaming=False,
    )
    assert spec.topics == ("A", "B")
    assert spec.starting.for_queue(("A", "b", 0)) == 5
    assert spec.starting.for_queue(("A", "b", 1)) == EARLIEST
    assert spec.starting.for_queue(("B", "b", 0)) == EARLIEST  # not named: the default
    pattern = read_options({"nameserver": "h:1", "topicPattern": "%DLQ%.*"}, streaming=False)
    assert (pattern.topics, pattern.topic_pattern) == ((), "%DLQ%.*")
    ts = read_options({**NS, "startingTimestamp": "1700000000000"}, streaming=False)
    assert (ts.starting.kind, ts.starting.timestamp_ms) == ("timestamp", 1700000000000)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "A"}, "option nameserver is required"),
        ({"nameserver": "host"}, "'host' is not host:port"),
        ({"nameserver": "h:1"}, "option topic is required"),
        ({**NS, "startingOffsets": "{oops"}, "malformed offsets JSON"),
        ({**NS, "startingOffsets": "[1]"}, "expected earliest, latest or JSON"),
        ({**NS, "startingOffsets": '{"A": {"b": {"x": 1}}}'}, "queue id 'x' is not a number"),
        ({**NS, "startingOffsets": '{"A": {"b": {"0": -3}}}'}, "must be an integer >= 0"),
        ({**NS, "startingOffsets": '{"A": [1]}'}, "expected an object of broker names"),
        ({**NS, "startingOffsets": '{"Z": {"b": {"0": 1}}}'}, "not in option topic"),
        ({**NS, "failOnDataLoss": "maybe"}, "expected true or false"),
        ({**NS, "maxOffsetsPerTrigger": "0"}, "must be at least 1"),
        ({**NS, "topicPattern": "A.*"}, "topic and topicPattern exclude each other"),
        ({"nameserver": "h:1", "topicPattern": "("}, "is not a regex"),
    ],
)
def test_read_options_errors_say_what_to_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_options(options, streaming=False)


def test_streams_have_no_end() -> None:
    with pytest.raises(ConfigError, match="endingOffsets is for batch reads"):
        read_options({**NS, "endingOffsets": "latest"}, streaming=True)


def test_resolve_offsets_and_data_loss() -> None:
    key, state = ("A", "b", 0), QueueState("h:1", 10, 20)
    assert resolve(EARLIEST, key, state, fail_on_data_loss=True, option="o") == 10
    assert resolve(LATEST, key, state, fail_on_data_loss=True, option="o") == 20
    assert resolve(15, key, state, fail_on_data_loss=True, option="o") == 15
    with pytest.raises(ConfigError, match=r"offset 5 has expired.*failOnDataLoss=false"):
        resolve(5, key, state, fail_on_data_loss=True, option="o")
    assert resolve(5, key, state, fail_on_data_loss=False, option="o") == 10
    with pytest.raises(ConfigError, match="beyond its end"):
        resolve(21, key, state, fail_on_data_loss=False, option="o")
    with pytest.raises(ConfigError, match="A/x/0"):
        check_known_queues({("A", "x", 0): 1}, {key: state}, "startingOffsets")


def test_split_and_json_round_trip() -> None:
    assert split_range(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert split_range(5, 5, 4) == []
    offsets = {("B", "b", 10): 1, ("A", "b", 2): 3, ("A", "a", 0): 0}
    js = to_json(offsets)
    assert list(js) == ["A", "B"] and js["A"]["b"] == {"2": 3}
    assert from_json(js) == offsets
    with pytest.raises(ConfigError, match="checkpoint"):
        from_json({"A": 1})


def test_rate_limit_spreads_by_backlog_without_starving() -> None:
    a, b, c = ("T", "b", 0), ("T", "b", 1), ("T", "b", 2)
    start = {a: 0, b: 0, c: 0}
    latest = {a: 1000, b: 100, c: 1}
    out = rate_limit(start, latest, 100)
    assert sum(out[k] - start[k] for k in out) == 100
    assert out[c] == 1  # the small queue gets its message
    assert out[a] > out[b] > 0
    assert rate_limit(start, latest, 5000) == latest
    few = rate_limit(start, latest, 2)
    assert sum(few.values()) == 2
    # Repeated micro-batches drain everything, never past the latest offsets.
    cur = dict(start)
    for _ in range(20):
        cur = rate_limit(cur, latest, 77)
        assert all(cur[k] <= latest[k] for k in cur)
    assert cur == latest


def _opts(**kw: object) -> WriteOptions:
    return WriteOptions(nameserver="h:1", topic="T", **kw)  # type: ignore[arg-type]


def test_write_columns_and_messages() -> None:
    opts = _opts()
    fields = [
        ("body", "string"), ("keys", "array<string>"), ("tags", "string"),
        ("properties", "map<string,string>"), ("delay_level", "int"), ("extra", "int"),
    ]  # fmt: skip
    cols = plan_columns(fields, opts)
    msg = to_message(("hi", ["k1", "k2"], "t", {"a": "1", "DELAY": "9"}, None, 7), cols, opts)
    assert (msg.topic, msg.body) == ("T", b"hi")
    assert msg.properties == {"a": "1", "KEYS": "k1 k2", "TAGS": "t"}
    delayed = to_message(("hi", None, None, None, 3, 0), cols, opts)
    assert delayed.properties == {"DELAY": "3"}
    with pytest.raises(ConfigError, match="needs a body column"):
        plan_columns([("value", "binary")], opts)
    with pytest.raises(ConfigError, match="column body is int"):
        plan_columns([("body", "int")], opts)
    with pytest.raises(ConfigError, match="needs a topic"):
        plan_columns([("body", "binary")], WriteOptions(nameserver="h:1", topic=None))
    with pytest.raises(Exception, match="empty body"):
        to_message(("", None, None, None, None, 0), cols, opts)


def test_chunks_group_by_topic_and_keep_delays_alone() -> None:
    opts = _opts(batch_size=3)
    cols = plan_columns([("topic", "string"), ("body", "string"), ("delay_level", "int")], opts)
    rows = [("A", "1", 0), ("A", "2", 0), ("B", "3", 0), ("B", "4", 2), ("B", "5", 0),
            ("B", "6", 0), ("B", "7", 0), ("B", "8", 0)]  # fmt: skip
    sizes = [
        [m.body.decode() for m in c]
        for c in chunks((to_message(r, cols, opts) for r in rows), opts)
    ]
    assert sizes == [["1", "2"], ["3"], ["4"], ["5", "6", "7"], ["8"]]


def _segment(path: object, start: int, bodies: list[bytes], size: int) -> None:
    data = bytearray()
    for i, body in enumerate(bodies):
        data += encode_record(
            MessageExt(topic="S", body=body, queue_offset=i, phy_offset=start + len(data))
        )
    blank = size - len(data)
    data += blank.to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big") + bytes(blank - 8)
    with open(f"{path}/{start:020d}", "wb") as f:
        f.write(data)


def test_store_plan_cuts_at_record_boundaries(tmp_path: object) -> None:
    _segment(tmp_path, 0, [b"x" * 100] * 30, 8192)
    _segment(tmp_path, 8192, [b"y" * 100] * 3, 8192)
    ranges = plan(StoreReadOptions(path=str(tmp_path), max_bytes_per_partition=1000))
    assert len(ranges) > 5 and not ranges[0].last_segment and ranges[-1].last_segment
    rows = []
    for rng in ranges:
        for batch in read_file_range(rng, StoreReadOptions(path=str(tmp_path))):
            rows += batch.to_pylist()
    assert [r["body"] for r in rows] == [b"x" * 100] * 30 + [b"y" * 100] * 3
    assert rows[30]["phy_offset"] == 8192
    assert [r["queue_offset"] for r in rows[:3]] == [0, 1, 2]
    one = plan(StoreReadOptions(path=str(tmp_path)))
    assert [(r.lo, r.hi) for r in one] == [(0, 8192), (0, 8192)]


def test_store_corruption_before_the_last_segment_is_reported(tmp_path: object) -> None:
    _segment(tmp_path, 0, [b"x" * 100] * 3, 4096)
    _segment(tmp_path, 4096, [b"y"], 4096)
    path = f"{tmp_path}/{0:020d}"
    first = len(encode_record(MessageExt(topic="S", body=b"x" * 100)))
    with open(path, "r+b") as f:
        f.seek(first + 4)
        f.write(b"\xff" * 4)  # the second record's magic code
    opts = store_read_options({"path": str(tmp_path)})
    with pytest.raises(Exception, match=r"corrupt record at offset \d+.*failOnCorruption=false"):
        for rng in plan(opts):
            list(read_file_range(rng, opts))
    lenient = store_read_options({"path": str(tmp_path), "failOnCorruption": "false"})
    count = sum(b.num_rows for rng in plan(lenient) for b in read_file_range(rng, lenient))
    assert count >= 2
    with pytest.raises(ConfigError, match="is not a directory"):
        plan(store_read_options({"path": f"{tmp_path}/nothing"}))
    with pytest.raises(ConfigError, match="no CommitLog segment"):
        os.makedirs(f"{tmp_path}/empty")
        plan(store_read_options({"path": f"{tmp_path}/empty"}))


# ----------------------------------------------------------------------------- executors


class FakeBroker:
    """Answers PULL_MESSAGE from a list of stored messages whose first offsets have expired."""

    def __init__(self, count: int, min_offset: int) -> None:
        self.records = [
            encode_record(MessageExt(topic="A", body=f"b{i}".encode(), queue_offset=i))
            for i in range(count)
        ]
        self.min_offset = min_offset
        self.pulls: list[tuple[int, int]] = []

    async def invoke(
        self, addr: str, code: int, fields: dict[str, Any], *a: object, **kw: object
    ) -> RemotingCommand:
        offset, nums = int(fields["queueOffset"]), int(fields["maxMsgNums"])
        self.pulls.append((offset, nums))
        assert fields["sysFlag"] & 0x1 == 0  # never commits an offset
        req = RemotingCommand.request(code, fields)
        extra = {"minOffset": self.min_offset, "maxOffset": len(self.records)}
        if offset < self.min_offset:
            return req.response(
                ResponseCode.PULL_OFFSET_MOVED,
                ext_fields={"nextBeginOffset": self.min_offset, **extra},
            )
        found = self.records[offset : offset + min(nums, 3)]  # a broker may answer fewer
        return req.response(
            ResponseCode.SUCCESS,
            ext_fields={"nextBeginOffset": offset + len(found), **extra},
            body=b"".join(found),
        )


def _read(broker: FakeBroker, start: int, end: int, **options: str) -> list[dict[str, Any]]:
    rng = QueueRange("A", "b", "h:1", 0, start, end)
    opts = read_options(
        {**NS, "pullBatchSize": "5", "pullsInFlight": "3", **options}, streaming=False
    )

    async def run() -> list[dict[str, Any]]:
        buf = RowBuffer(include_properties=True, store_columns=False)
        async for bodies in pull_range(broker, rng, opts):  # type: ignore[arg-type]
            for body in bodies:
                pull_reader._add_records(buf, body, rng)
        return buf.flush().to_pylist() if len(buf) else []

    return asyncio.run(run())


def test_pulls_cover_the_range_exactly_in_order() -> None:
    broker = FakeBroker(40, 0)
    rows = _read(broker, 3, 31)
    assert [r["queue_offset"] for r in rows] == list(range(3, 31))
    assert [r["body"] for r in rows[:2]] == [b"b3", b"b4"]
    assert {(r["topic"], r["broker"]) for r in rows} == {("A", "b")}
    assert all(nums <= 5 for _, nums in broker.pulls)


def test_expired_offsets_fail_or_are_skipped() -> None:
    with pytest.raises(DataLossError, match=r"offsets 2\.\.9 planned .* failOnDataLoss=false"):
        _read(FakeBroker(40, 10), 2, 20)
    rows = _read(FakeBroker(40, 10), 2, 20, failOnDataLoss="false")
    assert [r["queue_offset"] for r in rows] == list(range(10, 20))


def _stream_reader(
    monkeypatch: pytest.MonkeyPatch, states: dict[Any, QueueState], **options: str
) -> Any:
    reader = source.PocketMQStreamReader(read_options({**NS, **options}, streaming=True))
    monkeypatch.setattr(source, "_describe", lambda opts, *specs: (dict(states), {}))
    return reader


def test_stream_offsets_limits_and_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    q0, q1 = ("A", "b", 0), ("A", "b", 1)
    states = {q0: QueueState("h:1", 0, 100), q1: QueueState("h:1", 0, 10)}
    reader = _stream_reader(
        monkeypatch, states, startingOffsets="earliest", maxOffsetsPerTrigger="20"
    )
    start = reader.initialOffset()
    assert start == {"A": {"b": {"0": 0, "1": 0}}}
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 20
    end = reader.latestOffset(start, limit)
    assert sum(end["A"]["b"].values()) == 20
    parts = reader.partitions(start, end)
    assert sum(p.value.end - p.value.start for p in parts) == 20
    # All available without a limit; an unchanged offset comes back as the same object.
    full = reader.latestOffset(end, ReadAllAvailable())
    assert full == {"A": {"b": {"0": 100, "1": 10}}}
    assert reader.latestOffset(full, ReadAllAvailable()) is full
    # Trigger.AvailableNow stops at what was there when it was prepared.
    reader.prepareForTriggerAvailableNow()
    states[q0] = QueueState("h:1", 0, 150)
    assert reader.latestOffset(full, ReadAllAvailable()) is full
    # A new queue is read from its start.
    q2 = ("A", "b", 2)
    states[q2] = QueueState("h:1", 0, 5)
    later = _stream_reader(monkeypatch, states).latestOffset(full, ReadAllAvailable())
    assert later["A"]["b"]["2"] == 5
    new_parts = _stream_reader(monkeypatch, states).partitions(full, later)
    assert any(p.value.queue_id == 2 and p.value.start == 0 for p in new_parts)


def test_stream_data_loss_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    q0 = ("A", "b", 0)
    reader = _stream_reader(monkeypatch, {q0: QueueState("h:1", 50, 100)})
    with pytest.raises(DataLossError, match=r"next offset 10 has expired.*starts at 50"):
        reader.latestOffset({"A": {"b": {"0": 10}}}, ReadAllAvailable())
    reset = _stream_reader(monkeypatch, {q0: QueueState("h:1", 0, 5)})
    with pytest.raises(DataLossError, match="the queue was reset"):
        reset.latestOffset({"A": {"b": {"0": 10}}}, ReadAllAvailable())
    lenient = _stream_reader(monkeypatch, {q0: QueueState("h:1", 0, 5)}, failOnDataLoss="false")
    end = lenient.latestOffset({"A": {"b": {"0": 10}}}, ReadAllAvailable())
    parts = lenient.partitions({"A": {"b": {"0": 10}}}, end)
    assert [(p.value.start, p.value.end) for p in parts] == [(0, 5)]


def test_pulled_records_outside_the_range_are_left_out() -> None:
    """A pull answer may start before the range (a broker rounds to its own boundaries) and
    run past its end: those rows are dropped, the others kept in order."""
    body = b"".join(
        bytes(encode_record(MessageExt(topic="A", body=b"b%d" % i, queue_offset=i)))
        for i in range(6)
    )
    buf = RowBuffer(include_properties=False, store_columns=False)
    pull_reader._add_records(buf, body, QueueRange("A", "b", "h:1", 0, 2, 4))
    assert [r["queue_offset"] for r in buf.flush().to_pylist()] == [2, 3]
