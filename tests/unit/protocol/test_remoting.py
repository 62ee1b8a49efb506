"""Remoting frames: exact bytes, round trips, split input, real-client quirks, and fuzzing."""

from __future__ import annotations

import random
import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand, decode_frame


def frame(header: bytes, body: bytes = b"", serialize: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize << 24) | len(header)) + (
        header + body
    )


def drain(conn: RemotingConnection) -> list[RemotingCommand]:
    out = []
    while (cmd := conn.next_command()) is not NEED_DATA:
        assert isinstance(cmd, RemotingCommand)
        out.append(cmd)
    return out


def test_codes_keep_rocketmq_numbers() -> None:
    assert RequestCode.SEND_MESSAGE == 10
    assert RequestCode.PULL_MESSAGE == 11
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC == 105
    assert RequestCode.SEND_MESSAGE_V2 == 310
    assert RequestCode.SEND_BATCH_MESSAGE == 320
    assert RequestCode.POP_MESSAGE == 200050
    assert ResponseCode.SUCCESS == 0
    assert ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
    assert ResponseCode.TOPIC_NOT_EXIST == 17
    assert ResponseCode.PULL_NOT_FOUND == 19
    assert LanguageCode.CPP == 1
    assert LanguageCode.PYTHON == 3


def test_json_request_exact_bytes() -> None:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    cmd.opaque = 5
    header = (
        b'{"code":105,"language":"PYTHON","version":401,"opaque":5,"flag":0,'
        b'"extFields":{"topic":"T"},"serializeTypeCurrentRPC":"JSON"}'
    )
    assert cmd.encode() == frame(header)


def test_binary_request_exact_bytes() -> None:
    cmd = RemotingCommand(
        code=10,
        language=LanguageCode.JAVA,
        version=401,
        opaque=7,
        flag=0,
        remark="hi",
        ext_fields={"k": "vv"},
        body=b"BODY",
        serialize_type=SerializeType.ROCKETMQ,
    )
    header = (
        struct.pack(">hBhii", 10, 0, 401, 7, 0)
        + struct.pack(">i", 2)
        + b"hi"
        + struct.pack(">i", 2 + 1 + 4 + 2)
        + struct.pack(">H", 1)
        + b"k"
        + struct.pack(">i", 2)
        + b"vv"
    )
    assert cmd.encode() == frame(header, b"BODY", serialize=1)


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_round_trip(serialize: SerializeType) -> None:
    cmd = RemotingCommand(
        code=RequestCode.PULL_MESSAGE,
        language=LanguageCode.CPP,
        version=63,
        opaque=123456,
        flag=FLAG_ONEWAY,
        remark="ré",
        ext_fields={"topic": "T", "queueId": "3", "empty": "", "ключ": "значение"},
        body=bytes(range(256)),
        serialize_type=serialize,
    )
    decoded = decode_frame(cmd.encode()[4:])
    assert decoded == cmd
    assert decoded.is_oneway and not decoded.is_response


def test_response_keeps_opaque_and_serialization() -> None:
    req = RemotingCommand(code=10, opaque=99, serialize_type=SerializeType.ROCKETMQ)
    resp = req.response(ResponseCode.SUCCESS, ext_fields={"queueOffset": 5, "ok": True})
    assert resp.opaque == 99
    assert resp.flag == FLAG_RESPONSE and resp.is_response
    assert resp.serialize_type is SerializeType.ROCKETMQ
    assert resp.ext_fields == {"queueOffset": "5", "ok": "true"}
    assert decode_frame(resp.encode()[4:]).ext_fields == {"queueOffset": "5", "ok": "true"}


def test_cpp_client_send_message_header_is_parsed_leniently() -> None:
    # From client-traces/a_produce_consume.jsonl: numbers among the extFields strings,
    # language as a name, no serializeTypeCurrentRPC.
    header = orjson.dumps(
        {
            "code": 10,
            "extFields": {
                "batch": "0",
                "defaultTopicQueueNums": 4,
                "flag": 0,
                "queueId": 0,
                "sysFlag": 0,
                "topic": "TopicTest",
                "properties": "KEYS\x01key1\x02TAGS\x01TagA\x02",
            },
            "flag": 0,
            "language": "CPP",
            "opaque": 1,
            "remark": "",
            "version": 63,
        }
    )
    cmd = decode_frame(frame(header, b"hello-1")[4:])
    assert cmd.code == RequestCode.SEND_MESSAGE
    assert cmd.language == LanguageCode.CPP
    assert cmd.version == 63
    assert cmd.ext_fields["queueId"] == "0"
    assert cmd.ext_fields["defaultTopicQueueNums"] == "4"
    assert cmd.ext_fields["properties"] == "KEYS\x01key1\x02TAGS\x01TagA\x02"
    assert cmd.body == b"hello-1"
    assert cmd.remark == ""


def test_language_as_number_or_unknown_name() -> None:
    assert decode_frame(frame(b'{"code":1,"language":1}')[4:]).language == LanguageCode.CPP
    assert decode_frame(frame(b'{"code":1,"language":"COBOL"}')[4:]).language == LanguageCode.OTHER


def test_split_input_yields_the_same_commands() -> None:
    cmds = [
        RemotingCommand.request(10, {"i": i}, body=b"x" * i, oneway=i % 2 == 0) for i in range(20)
    ]
    for c in cmds[::3]:
        c.serialize_type = SerializeType.ROCKETMQ
    stream = b"".join(c.encode() for c in cmds)
    rng = random.Random(7)
    for trial in range(30):
        conn = RemotingConnection()
        got: list[RemotingCommand] = []
        pos = 0
        while pos < len(stream):
            # Byte by byte, the whole stream at once (frames decoded in place), random chunks.
            step = {0: 1, 1: len(stream)}.get(trial, rng.randint(1, 64))
            conn.receive_data(stream[pos : pos + step])
            pos += step
            got += drain(conn)
        assert got == cmds
        assert conn.buffered == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">i", -1), "frame length"),
        (struct.pack(">i", 2) + b"xx", "frame length"),
        (struct.pack(">i", 17 * 1024 * 1024), "frame length"),
        (struct.pack(">iI", 8, 100) + b"abcd", "header length"),
        (frame(b"{not json"), "not valid JSON"),
        (frame(b"[1,2]"), "not a JSON object"),
        (frame(b'{"code":"ten"}'), "not an integer"),
        (frame(b'{"extFields":{}}'), "not an integer"),
        (frame(b"{}", serialize=7), "unknown serialize type"),
        (frame(b"\x00\x0a\x00", serialize=1), "malformed binary header"),
        (frame(struct.pack(">hBhiii", 1, 0, 0, 0, 0, 50), serialize=1), "remark length"),
    ],
)
def test_malformed_frames_raise_and_stick(data: bytes, message: str) -> None:
    conn = RemotingConnection()
    conn.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=message):
        conn.next_command()
    with pytest.raises(RemoteProtocolError):
        conn.next_command()
    with pytest.raises(RemoteProtocolError):
        conn.receive_data(b"more")


def test_oversize_send_is_refused_locally() -> None:
    conn = RemotingConnection(max_frame=1024)
    with pytest.raises(LocalProtocolError):
        conn.send(RemotingCommand.request(10, body=b"x" * 2000))
    assert conn.send(RemotingCommand.request(10, body=b"x" * 10))


def test_opaques_are_positive_and_increasing() -> None:
    conn = RemotingConnection()
    first = conn.next_opaque()
    assert first > 0 and conn.next_opaque() == first + 1


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(min_value=1, max_value=40), max_size=8))
def test_any_input_gives_commands_or_remote_protocol_error(data: bytes, splits: list[int]) -> None:
    conn = RemotingConnection(max_frame=4096)
    pos = 0
    try:
        for step in [*splits, len(data)]:
            conn.receive_data(data[pos : pos + step])
            pos += step
            for cmd in drain(conn):
                assert isinstance(cmd.ext_fields, dict)
    except RemoteProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.integers(-(2**15), 2**15 - 1),
    st.integers(0, 255),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=5),
    st.one_of(st.none(), st.text(min_size=1, max_size=30)),
    st.binary(max_size=100),
    st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)
def test_round_trip_property(
    code: int,
    language: int,
    opaque: int,
    fields: dict[str, str],
    remark: str | None,
    body: bytes,
    serialize: SerializeType,
) -> None:
    lang = language % 14
    cmd = RemotingCommand(
        code=code,
        language=lang,
        opaque=opaque,
        remark=remark,
        ext_fields=fields,
        body=body,
        serialize_type=serialize,
    )
    assert decode_frame(cmd.encode()[4:]) == cmd


def test_a_kept_reference_to_a_decoded_frame_does_not_pin_the_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A traceback captured while a frame decodes (a warning, a profiler) keeps decode_frame's
    argument alive; the connection must still take more data and drop what it consumed."""
    from pocketmq.protocol import connection

    kept: list[object] = []

    def keeping(frame: memoryview) -> RemotingCommand:
        kept.append(frame)
        return decode_frame(frame)

    monkeypatch.setattr(connection, "decode_frame", keeping)
    # The reference's views (the extension's next_frame makes none; test_native_frame.py
    # checks that it leaves the buffer resizable).
    monkeypatch.setattr(connection, "next_frame", connection.next_frame_py)
    conn = RemotingConnection()
    cmds = [RemotingCommand.request(10, {"i": i}, body=b"x" * i) for i in range(3)]
    stream = b"".join(c.encode() for c in cmds)
    half = len(stream) // 2
    conn.receive_data(stream[:half])
    got = drain(conn)
    conn.receive_data(stream[half:])
    got += drain(conn)
    assert got == cmds and kept and conn.buffered == 0
