"""Revive-log records: checkpoint and ack records to JSON with RocketMQ's field names and
back, RocketMQ's own checkpoints read with our fields absent, unreadable bodies refused, and
the revive-log message of each record."""

from __future__ import annotations

import orjson
import pytest

from pocketmq.broker.pop.records import (
    ACK_TAG,
    CK_TAG,
    AckRecord,
    PopCheckpoint,
    UnreadableRecord,
    record_message,
)
from pocketmq.protocol.message import MessageConst

CK = PopCheckpoint(
    group="GID", topic="%RETRY%GID_T", queue_id=1, start_offset=10, pop_time=1_700_000_000_000,
    invisible_ms=30_000, queue_offsets=(10, 12, 13), broker_name="broker-a", next_begin=15,
    reconsumes=(0, 2, 1), fifo=False, subscribed="T",
)  # fmt: skip
ACK = AckRecord(
    group="GID", topic="T", queue_id=1, ack_offset=12, start_offset=12,
    pop_time=1_700_000_000_000, broker_name="broker-a",
)  # fmt: skip


def test_checkpoint_round_trip_with_rocketmq_field_names() -> None:
    data = orjson.loads(CK.to_json())
    assert data == {
        "so": 10, "pt": 1_700_000_000_000, "it": 30_000, "bm": 0, "n": 3, "q": 1,
        "t": "%RETRY%GID_T", "c": "GID", "ro": 0, "d": [0, 2, 3], "bn": "broker-a",
        "nb": 15, "rt": [0, 2, 1], "o": False, "st": "T",
    }  # fmt: skip
    assert PopCheckpoint.from_json(CK.to_json()) == CK
    assert CK.deadline == 1_700_000_030_000
    assert list(CK.messages()) == [(10, 0), (12, 2), (13, 1)]


def test_ack_round_trip_with_rocketmq_field_names() -> None:
    data = orjson.loads(ACK.to_json())
    assert data == {
        "ao": 12, "so": 12, "c": "GID", "t": "T", "q": 1, "pt": 1_700_000_000_000,
        "bn": "broker-a",
    }  # fmt: skip
    assert AckRecord.from_json(ACK.to_json()) == ACK


def test_a_checkpoint_without_our_optional_fields() -> None:
    data = orjson.loads(CK.to_json())
    for ours in ("rt", "o", "st"):
        del data[ours]
    ck = PopCheckpoint.from_json(orjson.dumps(data))
    assert ck.reconsumes == (0, 0, 0) and not ck.fifo and ck.subscribed == ck.topic


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"so": 1}',
        orjson.dumps({**orjson.loads(CK.to_json()), "rt": [0]}),  # one reconsume for three
        orjson.dumps({**orjson.loads(CK.to_json()), "d": "x"}),
        orjson.dumps({**orjson.loads(CK.to_json()), "pt": None}),
    ],
)
def test_unreadable_checkpoints(body: bytes) -> None:
    with pytest.raises(UnreadableRecord):
        PopCheckpoint.from_json(body)


@pytest.mark.parametrize("body", [b"", b"{}", b'{"ao": "x", "c": "G", "t": "T", "q": 0, "pt": 1}'])
def test_unreadable_ack_records(body: bytes) -> None:
    with pytest.raises(UnreadableRecord):
        AckRecord.from_json(body)


def test_record_messages() -> None:
    ck = record_message(CK, "rmq_sys_REVIVE_LOG_C", 123, ("10.0.0.1", 10911))
    assert (ck.topic, ck.queue_id, ck.born_timestamp) == ("rmq_sys_REVIVE_LOG_C", 0, 123)
    assert ck.tags == CK_TAG and ck.store_host == ("10.0.0.1", 10911)
    assert MessageConst.WAIT_STORE_MSG_OK not in ck.properties  # waits like any message
    assert PopCheckpoint.from_json(ck.body) == CK
    ack = record_message(ACK, "rmq_sys_REVIVE_LOG_C", 123, ("10.0.0.1", 10911))
    assert ack.tags == ACK_TAG and ack.properties[MessageConst.WAIT_STORE_MSG_OK] == "false"
    assert AckRecord.from_json(ack.body) == ACK
