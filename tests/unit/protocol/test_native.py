"""The C extension (pocketmq._speedups) against its pure-Python references, in one process.

Every native function must return what its reference returns (equal values of the same
type, so also a canonical str) and raise the same exception for the same input. Skipped when
the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pocketmq
from param_ids import case_id
from pocketmq.client import process_queue
from pocketmq.protocol import (
    batch,
    connection,
    message,
    native,
    properties,
    pull_body,
    record_codec,
    remoting,
    send_header,
)
from pocketmq.store import (
    commitlog,
    consume_queue,
    dispatch,
    index_insert,
    pull_scan,
    put_one,
)

speedups = pytest.importorskip("pocketmq._speedups")

# Any code point, lone surrogates included (Hypothesis leaves them out by default), and the
# property separators often enough that values hold them.
_CHARS = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from("\x01\x02é中😀\x7f\x80\uffff"),
)
TEXT = st.one_of(
    st.text(_CHARS, max_size=40),
    st.text(st.characters(max_codepoint=0x7F), max_size=40),
    # Long strings, past the reference's table of powers (4096 code units).
    st.text(_CHARS, min_size=1, max_size=8).map(lambda s: s * 1200),
)
# Valid UTF-16 (no lone surrogates): what a hash or a properties string normally holds.
WELL_FORMED = st.text(max_size=60)


def outcome(func: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        result = func(*args, **kwargs)
    except Exception as exc:  # the point is to compare whatever is raised
        return "raises", (type(exc), str(exc))
    return "returns", (type(result), result)


# Each native function by the module of its reference.
HOMES = {
    "encode_properties": properties,
    "decode_properties": properties,
    "java_string_hash": properties,
    "java_string_hash_concat": properties,
    "encode_records": record_codec,
    "place_records": record_codec,
    "put_record": commitlog,
    "put_one": put_one,
    "encode_batch_body": batch,
    "decode_batch_body": batch,
    "batch_messages": batch,
    "decode_message": record_codec,
    "decode_pull_body": pull_body,
    "index_put_requests": index_insert,
    "dispatch_requests": dispatch,
    "consume_queue_put_requests": consume_queue,
    "pull_scan": pull_scan,
    "offset_msg_ids_text": message,
    "decode_frame": remoting,
    "next_frame": connection,
    "encode_frame_head": remoting,
    "send_header": send_header,
    "hold_messages": process_queue,
    "release_messages": process_queue,
}
# The Spark readers' decoder, where pyarrow (a Spark extra) is installed: importing its module
# registers its reference.
try:
    from pocketmq.spark import rows
except ImportError:
    pass
else:
    HOMES["add_record"] = rows


def assert_same(name: str, *args: Any, **kwargs: Any) -> None:
    reference = getattr(HOMES[name], f"{name}_py")
    assert outcome(getattr(speedups, name), *args, **kwargs) == outcome(reference, *args, **kwargs)


def test_every_reference_is_registered() -> None:
    registered = speedups.REFERENCES
    assert registered == {name: getattr(home, f"{name}_py") for name, home in HOMES.items()}


def test_the_environment_picks_the_implementation() -> None:
    forced = os.environ.get(native.PURE_PYTHON_ENV, "") not in ("", "0")
    active = native.IMPLEMENTATION
    assert active == ("python" if forced else "native")
    expected = properties.java_string_hash_py if forced else speedups.java_string_hash
    assert properties.java_string_hash is expected


@given(TEXT)
def test_java_string_hash(text: str) -> None:
    assert_same("java_string_hash", text)


@given(st.one_of(st.integers(), st.integers(-(1 << 31), (1 << 31) - 1)), TEXT)
def test_java_string_hash_concat(prefix_hash: int, text: str) -> None:
    assert_same("java_string_hash_concat", prefix_hash, text)


@given(WELL_FORMED, WELL_FORMED)
def test_java_string_hash_concat_continues_the_native_hash(prefix: str, suffix: str) -> None:
    h = speedups.java_string_hash_concat(speedups.java_string_hash(prefix), suffix)
    assert h == speedups.java_string_hash(prefix + suffix)


@given(st.dictionaries(TEXT, TEXT, max_size=12))
def test_encode_properties(props: dict[str, str]) -> None:
    assert_same("encode_properties", props)


@given(TEXT)
def test_decode_properties(text: str) -> None:
    assert_same("decode_properties", text)


# Offsets of a put, and past a signed 64-bit field both ways (the reference masks those).
PHY_OFFSETS = st.lists(
    st.one_of(
        st.integers(0, 1 << 40),
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(-(1 << 80), 1 << 80),
        st.sampled_from([-1, 1 << 63, -(1 << 63) - 1, True]),
    ),
    max_size=40,
)


@given(st.one_of(st.sampled_from([bytes(8), b"\x7f\x00\x00\x01\x00\x00\x2a\x9f", bytes(20)]),
                 st.binary(max_size=30)), PHY_OFFSETS)  # fmt: skip
def test_offset_msg_ids_text(host: bytes, offsets: list[int]) -> None:
    assert_same("offset_msg_ids_text", host, offsets)


@pytest.mark.parametrize(
    "args",
    [
        (bytes(8), [1, "2"]),
        (bytes(8), [1, 2.0]),
        (bytes(8), (1, 2)),
        (bytearray(8), [1]),
        ("0" * 8, [1]),
        (bytes(8), None),
    ],
    ids=case_id,
)
def test_offset_msg_ids_text_of_other_types(args: tuple[Any, ...]) -> None:
    assert_same("offset_msg_ids_text", *args)


def test_offset_msg_ids_text_is_the_ids_joined() -> None:
    host = ("10.0.0.7", 10911)
    offsets = [0, 1234, -1, 1 << 62]
    text = speedups.offset_msg_ids_text(message.host_to_bytes(host), offsets)
    assert text.split(",") == message.create_offset_msg_ids(host, offsets)


@given(st.lists(st.tuples(TEXT, TEXT), max_size=8))
def test_decode_properties_of_encoded_pairs(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    assert_same("decode_properties", text)
    assert_same("decode_properties", text[:-1])  # no trailing separator, as some clients


class _Str(str):
    __slots__ = ()


class _Dict(dict[str, str]):
    pass


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("java_string_hash", (b"abc",)),
        ("java_string_hash", (None,)),
        ("java_string_hash", (42,)),
        ("java_string_hash", ("a\ud800b",)),
        ("java_string_hash", (_Str("abc"),)),
        ("java_string_hash", ()),
        ("java_string_hash", ("a", "b")),
        ("java_string_hash_concat", (1.5, "abc")),
        ("java_string_hash_concat", (True, "abc")),
        ("java_string_hash_concat", (1 << 100, "abc")),
        ("java_string_hash_concat", (-(1 << 70), "é😀")),
        ("java_string_hash_concat", (7, b"abc")),
        ("java_string_hash_concat", (7, "\udfff")),
        ("java_string_hash_concat", (None, None)),
        ("java_string_hash_concat", (7,)),
        ("encode_properties", (None,)),
        ("encode_properties", ([("a", "b")],)),
        ("encode_properties", ({"a": 1, "b": None},)),
        ("encode_properties", ({1: "a"},)),
        ("encode_properties", ({"a": _Str("x")},)),
        ("encode_properties", (_Dict(a="b"),)),
        ("encode_properties", (OrderedDict(a="b"),)),
        ("encode_properties", ("a",)),
        ("encode_properties", ({},)),
        ("decode_properties", (b"a\x01b",)),
        ("decode_properties", (b"",)),
        ("decode_properties", (None,)),
        ("decode_properties", (42,)),
        ("decode_properties", (_Str("a\x01b\x02"),)),
        ("decode_properties", ("",)),
        ("decode_properties", ("\x01\x02\x01",)),
    ],
    ids=case_id,
)
def test_malformed_input_fails_or_succeeds_as_the_reference(name: str, args: tuple[Any]) -> None:
    assert_same(name, *args)


def test_keyword_arguments_behave_as_the_reference() -> None:
    assert_same("java_string_hash", s="abc")
    assert_same("java_string_hash_concat", 3, s="abc")
    assert_same("encode_properties", properties={"a": "b"})
    assert_same("decode_properties", text="a\x01b")
    assert_same("decode_properties", txt="a\x01b")


def _fresh_boundary(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, native.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_the_extension_the_references_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a machine without a compiler: the import fails.
    monkeypatch.delattr(pocketmq, "_speedups")
    monkeypatch.setitem(sys.modules, "pocketmq._speedups", None)
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    boundary = _fresh_boundary("pocketmq_native_without_extension")
    assert boundary.IMPLEMENTATION == "python"
    assert boundary.DESCRIPTION.startswith("pure Python (pocketmq._speedups not built: ")
    assert boundary.select("java_string_hash", properties.java_string_hash_py) is (
        properties.java_string_hash_py
    )


@pytest.mark.parametrize(("value", "expected"), [("1", "python"), ("0", "native"), ("", "native")])
def test_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv(native.PURE_PYTHON_ENV, value)
    boundary = _fresh_boundary("pocketmq_native_env")
    active = boundary.IMPLEMENTATION
    assert active == expected
    chosen = boundary.select("java_string_hash", properties.java_string_hash_py)
    native_hash = speedups.java_string_hash
    assert chosen is (native_hash if expected == "native" else properties.java_string_hash_py)


def test_a_stale_build_is_refused() -> None:
    boundary = _fresh_boundary("pocketmq_native_stale")
    with pytest.raises(ImportError, match="has no encode_record: rebuild it"):
        boundary.select("encode_record", record_codec.encode_record)


def test_the_type_stub_declares_every_function_of_the_extension() -> None:
    """mypy sees the extension only through _speedups.pyi: a function missing there is typed as
    nothing at all where a caller uses it directly."""
    stub = ast.parse((Path(pocketmq.__file__).parent / "_speedups.pyi").read_text())
    declared = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)} | {
        t.id for n in stub.body if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }  # fmt: skip
    functions = {n for n in dir(speedups) if callable(getattr(speedups, n)) and n[0] != "_"}
    assert functions <= declared, sorted(functions - declared)
