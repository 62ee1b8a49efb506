"""decode_frame and next_frame of the C extension against their pure-Python references: the
same RemotingCommand (every field, of the same type) for every frame, the same exception with
the same message for bad ones. Headers are Hypothesis-drawn JSON objects (the fields RocketMQ
sends, with values of every JSON type, extra keys, nested values) written compact and with
escapes, whitespace and repeated keys, then cut, grown, bit-flipped, overwritten or given a
lying header length; next_frame reads them from a buffer of several, at any position, cut
anywhere, with lying length prefixes.
Skipped when the extension is not built.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_decode import byte_damage, outcome

from param_ids import case_id
from pocketmq.protocol import connection, remoting
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand

speedups = pytest.importorskip("pocketmq._speedups")

TEXT = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from('\x00\x01\x02"\\/é中😀')),
    max_size=10,
)
SCALAR = st.one_of(
    st.none(), st.booleans(), TEXT,
    st.integers(-(1 << 70), 1 << 70), st.integers(-(10**19), 10**19), st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
)  # fmt: skip
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=2), st.dictionaries(TEXT, SCALAR, max_size=2))
LANGUAGE = st.one_of(
    st.sampled_from(["JAVA", "CPP", "PYTHON", "NODE_JS", "OTHER", "java", "Go", "RUST", "ß"]),
    VALUE,
)
FIELDS = {
    "code": st.one_of(st.integers(-(1 << 40), 1 << 40), VALUE),
    "language": LANGUAGE,
    "version": st.one_of(st.integers(0, 500), VALUE),
    "opaque": st.one_of(st.integers(-(1 << 31), 1 << 31), VALUE),
    "flag": st.one_of(st.integers(0, 3), VALUE),
    "remark": st.one_of(TEXT, VALUE),
    "extFields": st.one_of(
        st.dictionaries(TEXT, SCALAR, max_size=6),
        st.dictionaries(TEXT, VALUE, max_size=3),
        VALUE,
    ),
    "serializeTypeCurrentRPC": st.one_of(st.just("JSON"), VALUE),
    "x": VALUE,
}


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(FIELDS)), unique=True))
    if draw(st.integers(0, 3)):
        names.append("code")  # nearly always: a header without a code is refused
    return {name: draw(FIELDS[name]) for name in names}


@st.composite
def header_texts(draw: st.DrawFn) -> bytes:
    header = draw(headers())
    style = draw(st.sampled_from(["compact", "ascii", "indent", "repeat"]))
    # json, not orjson: it writes integers past 64 bits too.
    compact = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    if style == "compact":
        return compact.encode()
    if style == "ascii":
        return json.dumps(header).encode()  # \uXXXX escapes, surrogate pairs
    if style == "indent":
        return json.dumps(header, indent=draw(st.integers(0, 2)), ensure_ascii=False).encode()
    # A key written twice, at the top or inside extFields.
    text = compact
    key = draw(st.sampled_from(["code", "opaque", "remark", "a"]))
    inner = draw(st.booleans()) and '"extFields":{' in text
    at = text.index('"extFields":{') + len('"extFields":{') if inner else 1
    extra = f'"{key}":{json.dumps(draw(SCALAR))}'
    sep = "" if text[at] == "}" else ","
    return (text[:at] + extra + sep + text[at:]).encode()


def frame_of(header: bytes, body: bytes, serialize: int = 0) -> bytes:
    return struct.pack(">I", (serialize << 24) | len(header)) + header + body


@st.composite
def damaged(draw: st.DrawFn, frame: bytes) -> bytes:
    """The frame cut short, grown, bit-flipped, overwritten, or with a lying header length or
    serialize type."""
    raw = bytearray(frame)
    kind = draw(st.sampled_from(["cut", "grow", "flip", "overwrite", "length", "serialize"]))
    if kind == "length":
        raw[1:4] = draw(st.integers(0, (1 << 24) - 1)).to_bytes(3, "big")
    elif kind == "serialize":
        raw[0] = draw(st.integers(0, 255))
    else:
        return byte_damage(draw, raw, kind)
    return bytes(raw)


def assert_same(*args: Any, **kwargs: Any) -> None:
    native = outcome(speedups.decode_frame, *args, **kwargs)
    assert native == outcome(remoting.decode_frame_py, *args, **kwargs)


def test_the_reference_is_registered() -> None:
    assert speedups.REFERENCES["decode_frame"] is remoting.decode_frame_py


@given(header_texts(), st.binary(max_size=40))
def test_decode_frame_of_drawn_headers(header: bytes, body: bytes) -> None:
    assert_same(frame_of(header, body))


@given(st.data())
def test_decode_frame_of_damaged_frames(data: st.DataObject) -> None:
    frame = frame_of(data.draw(header_texts()), data.draw(st.binary(max_size=10)))
    assert_same(data.draw(damaged(frame)))


@given(st.binary(max_size=60))
def test_decode_frame_of_random_bytes(raw: bytes) -> None:
    assert_same(raw)
    assert_same(b"\0" + raw)


@given(st.binary(max_size=60))
def test_decode_frame_of_random_json_headers(raw: bytes) -> None:
    assert_same(frame_of(b'{"code":1,"extFields":{"a":' + raw, b""))
    assert_same(frame_of(b'{"code":1,"remark":"' + raw + b'"}', b"body"))


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":1,"remark":"\\ud83d\\ude00"}',  # a surrogate pair
        b'{"code":1,"remark":"\\ud83d"}',  # a lone high surrogate
        b'{"code":1,"remark":"\\ude00x"}',  # a lone low surrogate
        b'{"code":1,"remark":"\\ud83d\\u0041"}',
        b'{"code":1,"remark":"\\x"}',
        b'{"code":1,"remark":"\\u00zz"}',
        b'{"code":1,"remark":"\xff"}',  # not UTF-8
        b'{"code":1,"remark":"a\nb"}',  # a raw control character
        b'{"code":-0}',
        b'{"code":01}',
        b'{"code":1.0}',
        b'{"code":1e2}',
        b'{"code":"12"}',
        b'{"code":123456789012345678}',
        b'{"code":1234567890123456789}',
        b'{"code":99999999999999999999}',
        b'{"code":-}',
        b'{"code":1}x',
        b'{"code":1,}',
        b'{"code":1 , "flag" : 2 }\r\n\t',
        b' {"code":1,"extFields":{}}',
        b'{"code":1,"extFields":{"a":-0}}',
        b'{"code":1,"extFields":{"a":null,"a":"x"}}',
        b'{"code":1,"extFields":{"a":[]}}',
        b'{"code":1,"extFields":[]}',
        b'{"code":1,"extFields":"x"}',
        b'{"code":1,"extFields":null}',
        b'{"code":1,"language":null}',
        b'{"code":1,"language":true}',
        b'{"code":1,"language":12345678901}',
        b'{"code":1,"language":"NODE_JS"}',
        b'{"code":1,"language":"HASKELL"}',
        b'{"code":1,"other":{"deep":[1,{"x":2}]}}',
        b'{"code":1,"other":tru}',
        b'{"\x80ode":null,"code":1}',  # a key that is not UTF-8
        b'{"code":1,"\\u00e9":2}',
        b"{}",
        b"[]",
        b"",
    ],
    ids=case_id,
)
def test_decode_frame_of_edge_headers(header: bytes) -> None:
    assert_same(frame_of(header, b"b"))


def test_decode_frame_of_every_buffer_type() -> None:
    header = {"a": "g", "i": encode_properties({"TAGS": "t", "UNIQ_KEY": "U"}), "e": 3}
    frame = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"body").encode()[4:]
    padded = b"\0" * 7 + frame + b"\0" * 5
    for buf in (frame, bytearray(frame), memoryview(frame), memoryview(padded)[7:-5],
                memoryview(frame).cast("c"), memoryview(padded)[::-1]):  # fmt: skip
        assert_same(buf)
    with memoryview(frame) as view:
        view.release()
        assert_same(view)
    assert remoting.decode_frame(frame).ext_fields["i"] == "TAGS\x01t\x02UNIQ_KEY\x01U\x02"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((None,), {}), (("text",), {}), ((b"\0\0\0\0", 1), {}), ((), {"frame": b""})],
    ids=case_id,
)
def test_decode_frame_of_bad_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    assert_same(*args, **kwargs)


def test_a_long_header_is_decoded_off_the_stack() -> None:
    header = orjson.dumps({"code": 7, "remark": "r" * 5000, "extFields": {"k": "\u00e9" * 3000}})
    assert_same(frame_of(header, b""))
    assert remoting.decode_frame(frame_of(header, b"")).remark == "r" * 5000


# --- next_frame: a connection's buffer, read from a position ------------------------------


def assert_same_next(buf: bytearray, pos: int, max_frame: int) -> None:
    before = bytes(buf)
    native = outcome(speedups.next_frame, buf, pos, max_frame)
    assert native == outcome(connection.next_frame_py, buf, pos, max_frame)
    assert bytes(buf) == before
    buf.append(0)  # neither left the buffer exported (a resize would raise BufferError)
    del buf[-1]


def test_next_frame_reference_is_registered() -> None:
    assert speedups.REFERENCES["next_frame"] is connection.next_frame_py


@given(st.data())
def test_next_frame_of_buffers_of_frames(data: st.DataObject) -> None:
    frames = [
        frame_of(data.draw(header_texts()), data.draw(st.binary(max_size=20)))
        for _ in range(data.draw(st.integers(1, 3)))
    ]
    if data.draw(st.booleans()):
        frames[-1] = data.draw(damaged(frames[-1]))
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    if data.draw(st.booleans()):  # a prefix that lies about the length
        at = data.draw(st.integers(0, len(stream) - 4))
        stream = (
            stream[:at]
            + struct.pack(">i", data.draw(st.integers(-(1 << 31), (1 << 31) - 1)))
            + stream[at + 4 :]
        )
    cut = data.draw(st.integers(0, len(stream)))
    buf = bytearray(data.draw(st.binary(max_size=6)) + stream[:cut])
    max_frame = data.draw(st.sampled_from([0, 3, 4, 5, 64, 1 << 20, (1 << 31) - 1, 1 << 40, -1]))
    pos = data.draw(st.integers(0, len(buf) + 2))
    assert_same_next(buf, pos, max_frame)


@given(st.binary(max_size=40), st.integers(-2, 50), st.integers(-1, 80))
def test_next_frame_of_random_bytes(raw: bytes, pos: int, max_frame: int) -> None:
    assert_same_next(bytearray(raw), pos, max_frame)


def test_next_frame_at_every_cut_of_a_stream() -> None:
    first = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"body").encode()
    second = RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"").encode()
    stream = first + second
    for cut in range(len(stream) + 1):
        for pos in (0, len(first)):
            assert_same_next(bytearray(stream[:cut]), pos, 1 << 20)


def test_next_frame_of_other_arguments() -> None:
    frame = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"body").encode()
    for buf in (frame, memoryview(frame)):
        assert outcome(speedups.next_frame, buf, 0, 1 << 20) == outcome(
            connection.next_frame_py, buf, 0, 1 << 20
        )
    assert_same_next(bytearray(frame), True, 1 << 20)  # a bool is off the fast path
    got = speedups.next_frame(bytearray(frame), 0, 1 << 20)
    assert got is not None and got[1] == len(frame) and got[0].body == b"body"
    assert_same_next(bytearray(frame), 0, 1 << 20)
    assert_same_next(bytearray(frame * 2), len(frame), 1 << 20)
