"""Writing DataFrame rows as messages: ``df.write.format("pocketmq")`` and ``writeStream``.

Columns (other columns are ignored):

    body         binary or string, required; a null or empty body fails the task
    topic        string; rows without one take option topic
    keys         string (space-separated keys) or array<string>
    tags         string
    properties   map<string,string>: user properties; RocketMQ's system properties
                 (UNIQ_KEY, DELAY, TRAN_MSG, ...) in it are dropped
    delay_level  int: a delay level (1 = 1s ... 18 = 2h); 0 or null = none
    deliver_at   timestamp, or long epoch ms: timer delivery (TIMER_DELIVER_MS)

Each task runs one Producer. Consecutive rows of one topic without a delay go as one
SEND_BATCH_MESSAGE (up to ``batchSize`` messages and ``batchBytes`` bytes); a row with a delay
goes alone. A send that fails after the producer's retries raises, so the task fails and Spark
retries it: rows are never dropped, and a retried task may send some of them twice
(at-least-once, as Spark's Kafka sink).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.client.ids import default_instance_name
from pocketmq.client.producer import Producer
from pocketmq.errors import ClientError, ConfigError
from pocketmq.protocol.message import Message, MessageConst
from pocketmq.spark.cluster import new_loop
from pocketmq.spark.options import WriteOptions
from pocketmq.tasks import cancel_and_wait

# Properties a producer must not set through the properties column (Java's
# Message.putUserProperty refuses them): they steer the broker.
SYSTEM_PROPERTIES: Final = frozenset(
    v
    for k, v in vars(MessageConst).items()
    if not k.startswith("_") and isinstance(v, str) and v not in ("KEYS", "TAGS")
) | {"CLUSTER", "MSG_REGION", "TRACE_ON", "INSTANCE_ID", "CORRECTION_FLAG", "MQ2_FLAG"}

# Spark type names (DataType.simpleString()) each column accepts.
_COLUMN_TYPES: Final = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "keys": ("string", "array<string>"),
    "tags": ("string",),
    "properties": ("map<string,string>",),
    "delay_level": ("tinyint", "smallint", "int", "bigint"),
    "deliver_at": ("timestamp", "timestamp_ntz", "bigint", "int"),
}


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    """Where each known column sits in a row (-1: absent). Built on the driver, pickled."""

    body: int
    topic: int
    keys: int
    tags: int
    properties: int
    delay_level: int
    deliver_at: int


def plan_columns(fields: Iterable[tuple[str, str]], opts: WriteOptions) -> ColumnPlan:
    """Check the DataFrame's (name, simpleString type) columns against what a write needs.

    Raises:
        ConfigError: no body column, a column of the wrong type, or no topic at all.
    """
    index: dict[str, int] = {}
    for i, (name, type_name) in enumerate(fields):
        key = name.lower()
        if key in _COLUMN_TYPES and key not in index:
            if type_name not in _COLUMN_TYPES[key]:
                raise ConfigError(
                    f"column {name} is {type_name}; writing to pocketmq needs "
                    f"{' or '.join(_COLUMN_TYPES[key])}"
                )
            index[key] = i
    if "body" not in index:
        have = ", ".join(n for n, _ in fields)
        raise ConfigError(
            f"writing to pocketmq needs a body column (binary or string); the DataFrame has: "
            f"{have}. Rename or cast one, e.g. df.selectExpr('CAST(value AS BINARY) AS body')"
        )
    if "topic" not in index and opts.topic is None:
        raise ConfigError(
            'writing to pocketmq needs a topic: a topic column, or .option("topic", "TopicA")'
        )
    return ColumnPlan(**{k: index.get(k, -1) for k in _COLUMN_TYPES})


def _epoch_ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        # PySpark hands timestamps over as naive local datetimes, as .timestamp() reads them.
        return int(value.timestamp() * 1000)
    return int(value)


def to_message(row: Any, cols: ColumnPlan, opts: WriteOptions) -> Message:
    """One row as a Message.

    Raises:
        ClientError: the row has no body or no topic.
    """
    topic = row[cols.topic] if cols.topic >= 0 else None
    topic = topic or opts.topic
    if not topic:
        raise ClientError(f"a row has a null topic and option topic is not set: {row!r}")
    body = row[cols.body]
    if isinstance(body, str):
        body = body.encode()
    if not body:
        raise ClientError(
            f"a row of topic {topic} has a null or empty body; RocketMQ refuses empty messages"
        )
    props: dict[str, str] = {}
    if cols.properties >= 0 and row[cols.properties]:
        props = {
            str(k): str(v)
            for k, v in row[cols.properties].items()
            if v is not None and k not in SYSTEM_PROPERTIES
        }
    if cols.keys >= 0 and row[cols.keys]:
        keys = row[cols.keys]
        props[MessageConst.KEYS] = keys if isinstance(keys, str) else " ".join(keys)
    if cols.tags >= 0 and row[cols.tags]:
        props[MessageConst.TAGS] = row[cols.tags]
    if cols.delay_level >= 0 and row[cols.delay_level]:
        props[MessageConst.DELAY_TIME_LEVEL] = str(int(row[cols.delay_level]))
    if cols.deliver_at >= 0 and row[cols.deliver_at] is not None:
        props[MessageConst.TIMER_DELIVER_MS] = str(_epoch_ms(row[cols.deliver_at]))
    return Message(topic, bytes(body), 0, props)


def _alone(msg: Message) -> bool:
    # Batches refuse delays; timers go alone too, so each keeps its own timer entry.
    return MessageConst.DELAY_TIME_LEVEL in msg.properties or (
        MessageConst.TIMER_DELIVER_MS in msg.properties
    )


def chunks(messages: Iterable[Message], opts: WriteOptions) -> Iterator[list[Message]]:
    """Group consecutive messages into sends: same topic, no delay, within the batch limits."""
    batch: list[Message] = []
    size = 0
    for msg in messages:
        if _alone(msg):
            if batch:
                yield batch
                batch, size = [], 0
            yield [msg]
            continue
        msg_size = len(msg.body) + 64 + sum(len(k) + len(v) + 2 for k, v in msg.properties.items())
        if batch and (
            batch[0].topic != msg.topic
            or len(batch) >= opts.batch_size
            or size + msg_size > opts.batch_bytes
        ):
            yield batch
            batch, size = [], 0
        batch.append(msg)
        size += msg_size
    if batch:
        yield batch


async def _send(producer: Producer, batch: list[Message], timeout_ms: int) -> int:
    if len(batch) == 1:
        await producer.send(batch[0], timeout_ms=timeout_ms)
    else:
        await producer.send_batch(batch, timeout_ms=timeout_ms)
    return len(batch)


async def send_rows(rows: Iterable[Any], cols: ColumnPlan, opts: WriteOptions) -> int:
    """Send every row, with up to writes_in_flight sends at once; returns how many were sent.

    Raises:
        ClientError, BrokerError, ConnectionError, TimeoutError: a send failed for good.
    """
    producer = Producer(
        opts.producer_group,
        opts.nameserver,
        send_timeout_ms=opts.timeout_ms,
        instance_name=f"spark-{default_instance_name()}",
    )
    await producer.start()
    in_flight: list[asyncio.Task[int]] = []
    sent = 0
    try:
        for batch in chunks((to_message(r, cols, opts) for r in rows), opts):
            if len(in_flight) >= opts.writes_in_flight:
                sent += await in_flight.pop(0)
            in_flight.append(asyncio.ensure_future(_send(producer, batch, opts.timeout_ms)))
        while in_flight:
            sent += await in_flight.pop(0)
        return sent
    finally:
        await cancel_and_wait(in_flight, ignore_errors=True)
        await producer.shutdown()


def write_rows(rows: Iterable[Any], cols: ColumnPlan, opts: WriteOptions) -> int:
    """send_rows on a fresh event loop (the body of DataSourceWriter.write)."""
    loop = new_loop()
    try:
        return loop.run_until_complete(send_rows(rows, cols, opts))
    finally:
        loop.close()


def schema_fields(schema: Any) -> list[tuple[str, str]]:
    """(name, simpleString type) of a pyspark StructType."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]
