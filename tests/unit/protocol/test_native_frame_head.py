"""encode_frame_head of the C extension against its pure-Python reference: the same bytes for
every command, the same exception with the same message for one that cannot be encoded.
Commands are Hypothesis-drawn with fields of the types the broker and the client set and of
the types nothing should set (bools, floats, ints past 64 bits, enum members, str and dict
subclasses, lone surrogates, control characters, many ext fields, both serializations), and
every field is then decoded back. Skipped when the extension is not built.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_decode import outcome

from param_ids import case_id
from pocketmq.protocol import remoting
from pocketmq.protocol.codes import LanguageCode
from pocketmq.protocol.remoting import RemotingCommand, SerializeType

speedups = pytest.importorskip("pocketmq._speedups")


class Text(str):
    pass


class Fields(dict[str, str]):
    pass


TEXT = st.text(
    st.one_of(st.characters(), st.sampled_from('\x00\x01\x02\x1f\x7f"\\/é\u2028中😀')), max_size=12
)
ANY_TEXT = st.one_of(TEXT, TEXT.map(Text))
INT = st.one_of(st.integers(-(1 << 31), 1 << 31), st.integers(-(1 << 63), (1 << 63) - 1))
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=3),
    ANY_TEXT,
    st.integers(-(1 << 70), 1 << 70),
    st.sampled_from([-(1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64]),
    st.sampled_from(list(LanguageCode)),
)
EXT_FIELDS = st.one_of(
    st.dictionaries(TEXT, TEXT, max_size=6),
    st.dictionaries(TEXT, TEXT, min_size=60, max_size=70),
)
ODD_EXT_FIELDS = st.one_of(
    st.none(),
    st.lists(TEXT, max_size=2),
    st.dictionaries(ANY_TEXT, st.one_of(ANY_TEXT, INT, ODD), max_size=4),
    st.dictionaries(TEXT, TEXT, max_size=3).map(Fields),
)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    def field(common: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> Any:
        # Mostly what the fast path takes, so that most commands are encoded by it.
        return draw(odd if draw(st.integers(0, 15)) == 0 else common)

    return RemotingCommand(
        code=field(INT, ODD),
        language=field(st.one_of(st.integers(-3, 300), st.sampled_from(list(LanguageCode))), ODD),
        version=field(INT, ODD),
        opaque=field(INT, ODD),
        flag=field(st.integers(0, 3), ODD),
        remark=field(st.one_of(st.none(), TEXT), st.one_of(ANY_TEXT, INT)),
        ext_fields=field(EXT_FIELDS, ODD_EXT_FIELDS),
        body=field(st.binary(max_size=20), st.one_of(st.none(), TEXT)),
        serialize_type=field(st.just(SerializeType.JSON), st.sampled_from(list(SerializeType))),
    )


def assert_same(*args: Any, **kwargs: Any) -> None:
    native = outcome(speedups.encode_frame_head, *args, **kwargs)
    assert native == outcome(remoting.encode_frame_head_py, *args, **kwargs)


def test_the_reference_is_registered() -> None:
    assert speedups.REFERENCES["encode_frame_head"] is remoting.encode_frame_head_py


@given(commands())
def test_encode_frame_head_of_drawn_commands(cmd: RemotingCommand) -> None:
    assert_same(cmd)


@given(
    st.integers(0, 400),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.one_of(st.none(), TEXT),
    st.dictionaries(TEXT, TEXT, max_size=8),
    st.binary(max_size=30),
)
def test_an_encoded_head_decodes_to_the_command(
    code: int, opaque: int, remark: str | None, ext: dict[str, str], body: bytes
) -> None:
    cmd = RemotingCommand(code=code, opaque=opaque, remark=remark, ext_fields=ext, body=body)
    assert_same(cmd)
    try:
        head = speedups.encode_frame_head(cmd)
    except Exception:  # a lone surrogate: the same error from both, checked above
        return
    back = remoting.decode_frame_py(head[4:] + body)
    assert (back.code, back.opaque, back.remark, back.ext_fields, back.body) == (
        code, opaque, remark, ext, body,
    )  # fmt: skip
    assert int.from_bytes(head[:4], "big") == len(head) - 4 + len(body)


@pytest.mark.parametrize(
    "fields",
    [
        {"code": True},
        {"flag": False},
        {"opaque": 1 << 63},
        {"version": -(1 << 63) - 1},
        {"code": LanguageCode.JAVA},
        {"language": True},
        {"language": LanguageCode.CPP},
        {"language": 256},
        {"language": -1},
        {"remark": Text("subclass")},
        {"remark": "\ud800"},
        {"ext_fields": Fields(a="b")},
        {"ext_fields": {"a": 1}},
        {"ext_fields": {"\udfff": "b"}},
        {"body": bytearray(b"x")},
        {"serialize_type": SerializeType.ROCKETMQ},
    ],
    ids=case_id,
)
def test_encode_frame_head_of_edge_fields(fields: dict[str, Any]) -> None:
    assert_same(RemotingCommand(**{"code": 0, "remark": "r", "ext_fields": {"k": "v"}, **fields}))


def test_long_headers_and_frames_go_to_the_reference() -> None:
    # A header past 24 bits of length: the reference's LocalProtocolError.
    assert_same(RemotingCommand(code=1, remark="\x01" * (0xFFFFFF // 6 + 1)))
    assert_same(RemotingCommand(code=1, ext_fields={"k": "v" * 0xFFFFFF}))
    # Near the limit, escapes counted exactly.
    assert_same(RemotingCommand(code=1, remark='"' * (0xFFFFFF // 2 - 100)))


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((None,), {}), ((b"x",), {}), ((RemotingCommand(code=1), 2), {})],
    ids=case_id,
)
def test_encode_frame_head_of_bad_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    assert_same(*args, **kwargs)
