"""fastjson-style bodies: unquoted integer keys are accepted, standard JSON is written."""

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
