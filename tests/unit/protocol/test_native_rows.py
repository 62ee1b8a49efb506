"""The Spark readers' record decoder in C (add_record) against its pure-Python reference
(pocketmq.spark.rows.add_record_py): the same values, of the same types, appended to the same
columns, and the same return value, for good records; the same exception with the same message,
and nothing appended, for bad ones; whatever the buffer type, position, limit and options.
Records are test_native_decode's: drawn messages (IPv6 hosts and compressed bodies included,
which the C side hands to the reference), cut short, bit-flipped or with lying lengths.
Skipped when the extension or pyarrow is missing.
"""

from __future__ import annotations

import dataclasses
import mmap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_decode import (
    IPV4,
    RAW_PROPERTIES,
    TEXT,
    damaged,
    messages,
    outcome,
    records,
    typed,
)

from pocketmq.protocol.message import MessageExt, SysFlag
from pocketmq.protocol.record_codec import encode_record

speedups = pytest.importorskip("pocketmq._speedups")
rows = pytest.importorskip("pocketmq.spark.rows")

OPTIONS = st.tuples(
    st.booleans(), st.booleans(), st.one_of(st.none(), TEXT), st.one_of(st.none(), TEXT)
)


@st.composite
def fast_records(draw: st.DrawFn) -> bytes:
    """Records the C side decodes itself: IPv4 hosts, a body as stored."""
    sys_flag = draw(st.integers(0, (1 << 31) - 1)) & ~(
        SysFlag.COMPRESSED | SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6
    )
    msg = dataclasses.replace(
        draw(messages()), sys_flag=sys_flag, born_host=draw(IPV4), store_host=draw(IPV4)
    )
    raw_properties = draw(st.one_of(st.none(), RAW_PROPERTIES.map(b"".join)))
    return bytes(encode_record(msg, raw_properties))


ANY_RECORD = st.one_of(records(), fast_records())


def assert_same_row(buf: Any, pos: Any, limit: Any, options: tuple[bool, bool, Any, Any]) -> None:
    include_properties, store_columns, topic, broker = options
    width = len(rows.STORE_ARROW_SCHEMA if store_columns else rows.READ_ARROW_SCHEMA)
    # A row already in the columns: nothing is appended to them but whole rows.
    seen = [[("earlier", i)] for i in range(width)]
    got = []
    for add in (speedups.add_record, rows.add_record_py):
        columns = [list(c) for c in seen]
        result = outcome(
            add, columns, include_properties, store_columns, buf, pos, limit, topic, broker
        )
        got.append((result, typed(columns)))
    assert got[0] == got[1]
    result, columns = got[0]
    if result[0] == "raises":
        assert columns == typed(seen)
    else:
        assert all(len(c) == 2 for c in columns)


def test_the_reference_is_registered() -> None:
    assert speedups.REFERENCES["add_record"] is rows.add_record_py


@given(records(), OPTIONS)
def test_good_records(record: bytes, options: tuple[bool, bool, Any, Any]) -> None:
    assert_same_row(record, 0, len(record), options)


@given(fast_records(), OPTIONS)
def test_good_records_of_the_fast_path(record: bytes, options: tuple[bool, bool, Any, Any]) -> None:
    assert_same_row(record, 0, len(record), options)


@given(st.data(), OPTIONS)
def test_damaged_records(data: st.DataObject, options: tuple[bool, bool, Any, Any]) -> None:
    record = data.draw(damaged(data.draw(ANY_RECORD)))
    assert_same_row(record, 0, len(record), options)


@given(st.binary(max_size=200), OPTIONS)
def test_random_bytes(raw: bytes, options: tuple[bool, bool, Any, Any]) -> None:
    assert_same_row(raw, 0, len(raw), options)


@given(ANY_RECORD, st.binary(max_size=20), st.integers(-30, 30), st.integers(-30, 30), OPTIONS)
def test_records_at_a_position_and_limit(
    record: bytes, prefix: bytes, shift: int, cut: int, options: tuple[bool, bool, Any, Any]
) -> None:
    buf = prefix + record + b"\0" * 8
    assert_same_row(buf, len(prefix) + shift, len(prefix) + len(record) + cut, options)


@given(ANY_RECORD, OPTIONS)
def test_records_in_every_buffer_type(record: bytes, options: tuple[bool, bool, Any, Any]) -> None:
    padded = b"\0" * 7 + record + b"\0" * 5
    end = 7 + len(record)
    assert_same_row(bytearray(padded), 7, end, options)
    assert_same_row(memoryview(padded), 7, end, options)
    assert_same_row(memoryview(padded)[7:-5], 0, len(record), options)
    assert_same_row(memoryview(padded)[::-1], 0, len(record), options)  # not contiguous
    with mmap.mmap(-1, len(padded)) as mapped:
        mapped[:] = padded
        assert_same_row(mapped, 7, end, options)


@pytest.mark.parametrize(
    "args",
    [
        (),
        ([[]] * 12, True, False, b"\0" * 100, 0, 100, None),  # one argument short
        ([[]] * 12, True, True, b"\0" * 100, 0, 100, None, None),  # 12 columns, 14 wanted
        ([()] * 12, True, False, b"\0" * 100, 0, 100, None, None),  # columns not lists
        ([[]] * 12, 1, False, b"\0" * 100, 0, 100, None, None),
        ([[]] * 12, True, False, "text", 0, 4, None, None),
        ([[]] * 12, True, False, b"\0" * 100, 1.5, 100, None, None),
        ([[]] * 12, True, False, b"\0" * 100, 0, 1 << 80, None, None),
        ([[]] * 12, True, False, b"\0" * 100, -1, 100, None, None),
        ([[]] * 12, True, False, b"\0" * 100, 0, 100, b"topic", None),
    ],
)
def test_input_off_the_fast_path_fails_as_the_reference_does(args: tuple[Any, ...]) -> None:
    assert outcome(speedups.add_record, *args) == outcome(rows.add_record_py, *args)


def test_a_row_buffer_makes_the_same_batch_either_way() -> None:
    """What Spark gets: the RecordBatch of rows decoded by either side."""

    def message(i: int) -> MessageExt:
        props = {"KEYS": f"k{i}", "TAGS": "t", "UNIQ_KEY": f"U{i}"} if i % 3 else {}
        return MessageExt(topic="T", body=bytes([i]) * 50, queue_id=i % 4, properties=props,
                          born_timestamp=1_700_000_000_000 + i, store_timestamp=i,
                          queue_offset=i, phy_offset=100 * i)  # fmt: skip

    body = b"".join(bytes(encode_record(message(i))) for i in range(20))
    batches = []
    for add in (speedups.add_record, rows.add_record_py):
        buf = rows.RowBuffer(include_properties=True, store_columns=True)
        pos = 0
        while pos < len(body):
            size, _, _ = add(buf.columns, True, True, body, pos, len(body), None, "b")
            pos += size
        batches.append(buf.flush())
    assert batches[0].num_rows == 20
    assert batches[0].equals(batches[1])
