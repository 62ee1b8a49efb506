"""fastjson-style bodies: unquoted integer and object keys are accepted; standard JSON is
written, and bean keys the fastjson way when asked."""

from __future__ import annotations

import pytest

from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body


def test_unquoted_integer_keys_from_fastjson() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"x{2:3}"},"brokerName":"b"}],'
        b'"note":"a,5:b"}'
    )
    assert json_body.loads(body) == {
        "brokerDatas": [
            {"brokerAddrs": {"0": "127.0.0.1:10911", "1": "x{2:3}"}, "brokerName": "b"}
        ],
        "note": "a,5:b",
    }


def test_standard_json_and_errors() -> None:
    assert json_body.loads(b'{"a":[1,2]}') == {"a": [1, 2]}
    assert json_body.dumps({0: "x"}) == b'{"0":"x"}'
    with pytest.raises(RemoteProtocolError):
        json_body.loads(b"{not json")
    with pytest.raises(RemoteProtocolError):
        json_body.loads(b"\xff\xfe")


# ConsumeStats as fastjson writes it: a MessageQueue bean as the map key, fields in name order.
JAVA_CONSUME_STATS = (
    b'{"consumeTps":0.0,"offsetTable":{'
    b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
    b'{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1700000000000,"pullOffset":4},'
    b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
    b'{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}'
)


def test_object_keys_from_fastjson_become_string_keys() -> None:
    stats = json_body.loads(JAVA_CONSUME_STATS)
    assert stats["consumeTps"] == 0.0
    keys = list(stats["offsetTable"])
    assert keys == [
        '{"brokerName":"broker-a","queueId":0,"topic":"T"}',
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}',
    ]
    assert [json_body.parse_message_queue_key(k) for k in keys] == [
        ("T", "broker-a", 0),
        ("T", "broker-a", 1),
    ]
    assert stats["offsetTable"][keys[0]]["pullOffset"] == 4


def test_object_keys_beside_strings_braces_and_int_keys() -> None:
    body = (
        b'{"s":"{\\"a\\":1}:x","t":{ {"k":{0:"v"}} : [{"v":1},{"w":2}] },'
        b'"u":{1:{"brokerName":"b{","queueId":2,"topic":"T"}}}'
    )
    assert json_body.loads(body) == {
        "s": '{"a":1}:x',
        "t": {'{"k":{0:"v"}}': [{"v": 1}, {"w": 2}]},
        "u": {"1": {"brokerName": "b{", "queueId": 2, "topic": "T"}},
    }
    assert json_body.loads(b'{{"a":1}:1, {"a":2}\n:2}') == {'{"a":1}': 1, '{"a":2}': 2}
    with pytest.raises(RemoteProtocolError):
        json_body.loads(b'{{"a":1}:}')


def test_dumps_object_keys_writes_what_fastjson_writes() -> None:
    table = {
        json_body.message_queue_key("T", "broker-a", 0): {
            "brokerOffset": 5, "consumerOffset": 3, "lastTimestamp": 1700000000000, "pullOffset": 4,
        },
        json_body.message_queue_key("T", "broker-a", 1): {
            "brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0, "pullOffset": 0,
        },
    }  # fmt: skip
    body = json_body.dumps_object_keys({"consumeTps": 0.0, "offsetTable": table})
    assert body == JAVA_CONSUME_STATS
    assert json_body.dumps_object_keys({"a": [1, {"b": None}], "c": "d"}) == json_body.dumps(
        {"a": [1, {"b": None}], "c": "d"}
    )


@pytest.mark.parametrize(
    "key", ['{"brokerName":"b","queueId":"x","topic":"T"}', '{"topic":"T"}', "[1]", "{oops"]
)
def test_bad_message_queue_keys(key: str) -> None:
    with pytest.raises(RemoteProtocolError):
        json_body.parse_message_queue_key(key)
