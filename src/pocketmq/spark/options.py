"""The options of the ``pocketmq`` and ``pocketmq-store`` data sources, parsed and checked.

Spark hands a data source its options as a case-insensitive map of strings. This module turns
them into frozen, picklable dataclasses once, on the driver, and raises ConfigError naming the
option and what to write instead. No I/O here and no pyspark import: it is tested without Spark.

Offsets follow Spark's Kafka source: ``earliest``, ``latest`` or JSON per queue,
``{"TopicA": {"broker-a": {"0": 12, "1": -2}}}``, where -2 means earliest and -1 latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pocketmq.errors import ConfigError
from pocketmq.protocol.fields import MAX_BATCH_SIZE

EARLIEST: Final = -2  # in offsets JSON, as Kafka's
LATEST: Final = -1

DEFAULT_READ_GROUP: Final = "pocketmq-spark-reader"
DEFAULT_WRITE_GROUP: Final = "pocketmq-spark-writer"

# Spark's Kafka source sets no limit either; a range this long becomes several partitions.
DEFAULT_MAX_RECORDS_PER_PARTITION: Final = 100_000
# A broker answers at most 32 messages (maxTransferCountOnMessageInMemory) per pull.
DEFAULT_PULL_BATCH_SIZE: Final = 32
# Pulls in flight per partition: hides the round trip without flooding a broker.
DEFAULT_PULLS_IN_FLIGHT: Final = 8
DEFAULT_TIMEOUT_MS: Final = 10_000
# As Spark's spark.sql.files.maxPartitionBytes: a 1 GiB CommitLog segment makes 8 tasks.
DEFAULT_MAX_BYTES_PER_PARTITION: Final = 128 << 20
# A batch request carries at most 4 MiB (maxMessageSize); 1 MiB leaves room for headers.
DEFAULT_WRITE_BATCH_BYTES: Final = 1 << 20
DEFAULT_WRITE_BATCH_SIZE: Final = 128
DEFAULT_WRITES_IN_FLIGHT: Final = 4


# (topic, broker name, queue id) -> offset (or EARLIEST / LATEST)
QueueOffsets = dict[tuple[str, str, int], int]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind`` is ``earliest``, ``latest``, ``timestamp`` (``timestamp_ms`` for every queue) or
    ``json`` (``per_queue``; queues it does not name take ``default``).
    """

    kind: str
    timestamp_ms: int = 0
    per_queue: QueueOffsets = field(default_factory=dict)
    default: int = EARLIEST

    def for_queue(self, key: tuple[str, str, int]) -> int:
        """EARLIEST, LATEST or an offset; ``timestamp`` is resolved by the caller."""
        if self.kind == "earliest":
            return EARLIEST
        if self.kind == "latest":
            return LATEST
        return self.per_queue.get(key, self.default)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadOptions:
    """Options of ``format("pocketmq")`` reads, batch and streaming."""

    nameserver: str  # "host:port" or "host:port;host:port"
    topics: tuple[str, ...]  # empty with topic_pattern
    topic_pattern: str | None = None  # a regex the whole topic name must match
    starting: OffsetSpec
    ending: OffsetSpec  # batch only
    max_offsets_per_trigger: int | None = None  # streaming only
    fail_on_data_loss: bool = True
    include_properties: bool = True
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    consumer_group: str = DEFAULT_READ_GROUP  # named in pulls; no offset is ever committed
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pulls_in_flight: int = DEFAULT_PULLS_IN_FLIGHT
    timeout_ms: int = DEFAULT_TIMEOUT_MS


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """Options of ``format("pocketmq")`` writes, batch and streaming."""

    nameserver: str
    topic: str | None  # used for rows without a topic column or with a null topic
    producer_group: str = DEFAULT_WRITE_GROUP
    batch_size: int = DEFAULT_WRITE_BATCH_SIZE  # messages per SEND_BATCH_MESSAGE
    batch_bytes: int = DEFAULT_WRITE_BATCH_BYTES
    writes_in_flight: int = DEFAULT_WRITES_IN_FLIGHT
    timeout_ms: int = DEFAULT_TIMEOUT_MS


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreReadOptions:
    """Options of ``format("pocketmq-store").load(DIR)``."""

    path: str  # the store root (holding commitlog/) or the commitlog directory itself
    broker: str | None = None  # fills the broker column: a record does not name its broker
    include_properties: bool = True
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    min_partitions: int | None = None  # cut smaller ranges to get at least this many
    fail_on_corruption: bool = True


# ----------------------------------------------------------------------------- primitives


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark lower-cases option names; a plain dict from a test may not.
    for key in (name, name.lower()):
        if key in options and options[key] is not None:
            return str(options[key])
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}={raw!r}: expected true or false")


def _int(
    options: Mapping[str, str],
    name: str,
    default: int | None,
    minimum: int,
    maximum: int | None = None,
) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option {name}={raw!r}: expected an integer") from None
    if value < minimum:
        raise ConfigError(f"option {name}={value}: must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"option {name}={value}: must be at most {maximum}")
    return value


def _req_int(
    options: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    value = _int(options, name, default, minimum, maximum)
    assert value is not None
    return value


def parse_nameserver(options: Mapping[str, str]) -> str:
    """The ``nameserver`` option: ``host:port`` or several separated by ``;``.

    Raises:
        ConfigError: missing, or an address without a numeric port.
    """
    raw = _get(options, "nameserver")
    if raw is None or not raw.strip():
        raise ConfigError(
            'option nameserver is required: .option("nameserver", "host:9876") '
            '(several as "host1:9876;host2:9876")'
        )
    addrs = [a.strip() for a in raw.replace(",", ";").split(";") if a.strip()]
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"option nameserver={raw!r}: {addr!r} is not host:port (e.g. 127.0.0.1:9876)"
            )
    return ";".join(addrs)


def parse_topics(options: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The ``topic`` option (alias ``topics``: one topic or several separated by commas) or
    ``topicPattern`` (a regular expression over the NameServer's topics, as Kafka's
    subscribePattern).

    Raises:
        ConfigError: neither or both, or a pattern that does not compile.
    """
    raw = _get(options, "topic") or _get(options, "topics")
    topics = tuple(dict.fromkeys(t.strip() for t in (raw or "").split(",") if t.strip()))
    pattern = _get(options, "topicPattern")
    if pattern is not None and topics:
        raise ConfigError("options topic and topicPattern exclude each other: give one")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option topicPattern={pattern!r} is not a regex: {exc}") from None
        return (), pattern
    if not topics:
        raise ConfigError(
            'option topic is required: .option("topic", "TopicA") or "TopicA,TopicB" '
            '(or .option("topicPattern", "%DLQ%.*"))'
        )
    return topics, None


def parse_offsets_json(name: str, raw: str) -> QueueOffsets:
    """``{"TopicA": {"broker-a": {"0": 12, "1": -2}}}`` -> {(topic, broker, queue): offset}.

    Raises:
        ConfigError: not JSON, or not nested topic -> broker -> queue id -> integer offset.
    """
    example = '{"TopicA": {"broker-a": {"0": 12, "1": -2}}} (-2 = earliest, -1 = latest)'
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"option {name}: malformed offsets JSON ({exc.msg} at character {exc.pos}); "
            f'expected "earliest", "latest" or JSON like {example}'
        ) from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"option {name}: expected a JSON object like {example}")
    out: QueueOffsets = {}
    for topic, brokers in data.items():
        if not isinstance(brokers, dict):
            raise ConfigError(
                f"option {name}: topic {topic!r} maps to {brokers!r}, expected an object of "
                f"broker names, like {example}"
            )
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ConfigError(
                    f"option {name}: {topic}/{broker} maps to {queues!r}, expected an object of "
                    f"queue ids, like {example}"
                )
            for qid, offset in queues.items():
                if not str(qid).isdigit():
                    raise ConfigError(
                        f"option {name}: {topic}/{broker}: queue id {qid!r} is not a number"
                    )
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ConfigError(
                        f"option {name}: {topic}/{broker}/{qid}: offset {offset!r} must be an "
                        "integer >= 0, or -2 (earliest) or -1 (latest)"
                    )
                out[(str(topic), str(broker), int(qid))] = offset
    return out


def parse_offset_spec(
    options: Mapping[str, str], name: str, timestamp_name: str, default: str
) -> OffsetSpec:
    """``startingOffsets``/``endingOffsets`` and their timestamp twin (epoch ms, which wins).

    Raises:
        ConfigError: a malformed value.
    """
    ts = _int(options, timestamp_name, None, 0)
    if ts is not None:
        return OffsetSpec("timestamp", timestamp_ms=ts)
    raw = (_get(options, name) or default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    if not raw.startswith("{"):
        raise ConfigError(
            f"option {name}={raw!r}: expected earliest, latest or JSON per queue like "
            '{"TopicA": {"broker-a": {"0": 12}}}; for a time use option '
            f"{timestamp_name} (epoch milliseconds)"
        )
    default_offset = EARLIEST if name == "startingOffsets" else LATEST
    return OffsetSpec("json", per_queue=parse_offsets_json(name, raw), default=default_offset)


# ----------------------------------------------------------------------------- whole sets


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Parse the options of a read; streaming reads start at ``latest`` by default.

    Raises:
        ConfigError: the first option that is missing or malformed.
    """
    nameserver = parse_nameserver(options)
    topics, pattern = parse_topics(options)
    starting = parse_offset_spec(
        options, "startingOffsets", "startingTimestamp", "latest" if streaming else "earliest"
    )
    ending = parse_offset_spec(options, "endingOffsets", "endingTimestamp", "latest")
    if streaming and (_get(options, "endingOffsets") or _get(options, "endingTimestamp")):
        raise ConfigError(
            "option endingOffsets is for batch reads (spark.read); a stream has no end"
        )
    for spec, opt in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        unknown = sorted({k[0] for k in spec.per_queue} - set(topics))
        if unknown and pattern is None:
            raise ConfigError(
                f"option {opt} names topic(s) {unknown} that are not in option topic "
                f"({','.join(topics)})"
            )
    return ReadOptions(
        nameserver=nameserver,
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, 1),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_properties=_bool(options, "includeProperties", True),
        max_records_per_partition=_req_int(
            options, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION, 1
        ),
        consumer_group=_get(options, "consumerGroup") or DEFAULT_READ_GROUP,
        # The broker refuses pulls of more (protocol.fields.MAX_BATCH_SIZE).
        pull_batch_size=_req_int(
            options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, 1, MAX_BATCH_SIZE
        ),
        pulls_in_flight=_req_int(options, "pullsInFlight", DEFAULT_PULLS_IN_FLIGHT, 1),
        timeout_ms=_req_int(options, "timeoutMs", DEFAULT_TIMEOUT_MS, 1),
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Raises: ConfigError: the first option that is missing or malformed."""
    topic = _get(options, "topic")
    return WriteOptions(
        nameserver=parse_nameserver(options),
        topic=topic.strip() if topic and topic.strip() else None,
        producer_group=_get(options, "producerGroup") or DEFAULT_WRITE_GROUP,
        batch_size=_req_int(options, "batchSize", DEFAULT_WRITE_BATCH_SIZE, 1),
        batch_bytes=_req_int(options, "batchBytes", DEFAULT_WRITE_BATCH_BYTES, 1),
        writes_in_flight=_req_int(options, "writesInFlight", DEFAULT_WRITES_IN_FLIGHT, 1),
        timeout_ms=_req_int(options, "timeoutMs", DEFAULT_TIMEOUT_MS, 1),
    )


def store_read_options(options: Mapping[str, str]) -> StoreReadOptions:
    """Raises: ConfigError: no path, or a malformed option."""
    path = _get(options, "path")
    if path is None or not path.strip():
        raise ConfigError(
            'pocketmq-store needs a directory: spark.read.format("pocketmq-store").load(DIR), '
            "DIR being the store root (holding commitlog/) or its commitlog directory"
        )
    return StoreReadOptions(
        path=path.strip(),
        broker=_get(options, "broker"),
        include_properties=_bool(options, "includeProperties", True),
        max_bytes_per_partition=_req_int(
            options, "maxBytesPerPartition", DEFAULT_MAX_BYTES_PER_PARTITION, 1
        ),
        min_partitions=_int(options, "minPartitions", None, 1),
        fail_on_corruption=_bool(options, "failOnCorruption", True),
    )
