"""REGISTER_BROKER bodies: JSON, and compressed ones built by hand in the layout Java's
RegisterBrokerBody.encode(true) writes (big-endian int32 lengths inside a zlib stream)."""

from __future__ import annotations

import logging
import struct
import zlib

import pytest

from pocketmq.errors import RequestError
from pocketmq.namesrv import server
from pocketmq.namesrv.server import V5_0_0, decode_register_body
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import ResponseCode

V4_9_4 = 401
DATA_VERSION = b'{"counter":7,"stateVersion":0,"timestamp":1700000000000}'
TOPICS = [
    b'Orders 8 4 6 SINGLE_TAG {"+message.type":"NORMAL"}',
    b"Plain 2 2 4 MULTI_TAG ",  # attributes null: Java leaves the trailing separator
]
MAPPING = b'{"bname":"broker-a","currIdMap":{},"epoch":1,"topic":"Static","totalQueues":4}'


def field(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def inflated(
    topics: list[bytes] = TOPICS,
    filter_servers: bytes = b"[]",
    mappings: list[bytes] | None = None,
) -> bytes:
    raw = field(DATA_VERSION) + struct.pack(">i", len(topics)) + b"".join(map(field, topics))
    raw += field(filter_servers)
    if mappings is not None:
        raw += struct.pack(">i", len(mappings)) + b"".join(map(field, mappings))
    return raw


def compressed(raw: bytes) -> bytes:
    return zlib.compress(raw, 9)  # Deflater(BEST_COMPRESSION): a zlib stream, not raw deflate


EXPECTED_TOPICS = {
    "Orders": {"topicName": "Orders", "readQueueNums": 8, "writeQueueNums": 4, "perm": 6,
               "topicFilterType": "SINGLE_TAG"},
    "Plain": {"topicName": "Plain", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4,
              "topicFilterType": "MULTI_TAG"},
}  # fmt: skip


def refusal(body: bytes, version: int = V4_9_4) -> str:
    with pytest.raises(RequestError) as info:
        decode_register_body(body, True, version)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark.startswith("Failed to decode RegisterBrokerBody: ")
    return info.value.remark


def test_compressed_body_of_a_4x_broker() -> None:
    body = decode_register_body(compressed(inflated(filter_servers=b'["10.0.0.9:1"]')), True, 401)
    assert body.topic_configs == EXPECTED_TOPICS
    assert body.data_version == {"counter": 7, "stateVersion": 0, "timestamp": 1700000000000}
    assert body.filter_servers == ["10.0.0.9:1"]
    # A 4.x body ends after the filter servers; anything after it is not read, as in Java.
    again = decode_register_body(compressed(inflated(mappings=[b"junk"])), True, V4_9_4)
    assert again.topic_configs == EXPECTED_TOPICS


def test_compressed_body_of_a_5x_broker_has_queue_mappings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = decode_register_body(compressed(inflated(mappings=[])), True, V5_0_0)
    assert body.topic_configs == EXPECTED_TOPICS and body.filter_servers == []
    with caplog.at_level(logging.WARNING, logger="pocketmq.namesrv.server"):
        body = decode_register_body(compressed(inflated(mappings=[MAPPING])), True, V5_0_0 + 70)
    assert body.topic_configs == EXPECTED_TOPICS
    assert "queue mappings of 1 static topics" in caplog.text
    # Without its mapping section a 5.x body is short.
    assert "truncated" in refusal(compressed(inflated()), V5_0_0)


def test_empty_and_json_bodies() -> None:
    assert decode_register_body(b"", True, V5_0_0).topic_configs == {}
    wrapper = {"topicConfigTable": {"T": {"topicName": "T", "readQueueNums": 1}},
               "dataVersion": {"counter": 1}}  # fmt: skip
    body = json_body.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})
    decoded = decode_register_body(body, False, V5_0_0)
    assert decoded.topic_configs == wrapper["topicConfigTable"]
    assert decoded.data_version == {"counter": 1}
    with pytest.raises(RequestError, match="Failed to decode RegisterBrokerBody: body is not"):
        decode_register_body(b"{broken", False, V4_9_4)
    with pytest.raises(RequestError, match="not a JSON object"):
        decode_register_body(b"[1]", False, V4_9_4)
    # A compressed body read as JSON is refused, not misread.
    with pytest.raises(RequestError, match="body is not JSON"):
        decode_register_body(compressed(inflated()), False, V4_9_4)


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_compressed_stream(keep: float) -> None:
    whole = compressed(inflated(topics=TOPICS * 20))
    remark = refusal(whole[: int(len(whole) * keep)])
    assert "truncated" in remark and "the compressed stream is cut short" in remark


def test_truncated_fields_inside_a_whole_stream() -> None:
    raw = inflated()
    for cut in (0, 3, 10, len(raw) - 1):
        assert "truncated" in refusal(compressed(raw[:cut]))
    assert "cut short" not in refusal(compressed(raw[:10]))


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 16, b"not zlib at all", b"\x78\xda" + b"\xff" * 30, bytes(range(256))],
)
def test_garbage_is_not_a_zlib_stream(garbage: bytes) -> None:
    assert "not a zlib stream" in refusal(garbage)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (field(b"{nope") + bytes(4), "the data version: body is not JSON"),
        (field(b"[]") + bytes(4), "data version is not a JSON object"),
        (field(DATA_VERSION) + struct.pack(">i", -1), "topic count at offset"),
        (inflated(topics=[b"Orders x 4 6 SINGLE_TAG"]), "bad topic config"),
        (inflated(topics=[b"Orders 4 4 6 NO_SUCH_TYPE"]), "bad topic config"),
        (inflated(topics=[b"Orders 4 4"]), "bad topic config"),
        (inflated(topics=[b" 4 4 6 SINGLE_TAG"]), "bad topic config"),
        (inflated(topics=[b"\xff 4 4 6 SINGLE_TAG"]), "bad topic config"),
        (inflated(filter_servers=b'{"a":1}'), "not a JSON array of strings"),
        (inflated(filter_servers=b"[1]"), "not a JSON array of strings"),
    ],
)
def test_bad_fields_are_named(raw: bytes, words: str) -> None:
    assert words in refusal(compressed(raw))


def test_a_zlib_bomb_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "MAX_INFLATED_REGISTER_BODY_BYTES", 1024)
    assert "inflates to more than 1024 bytes" in refusal(compressed(inflated() + bytes(2048)))
