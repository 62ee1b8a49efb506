"""The read path of the C extension (decode_message, decode_pull_body) against its pure-Python
references: the same MessageExt objects (every field, of the same type) for good records, the
same exception with the same message for bad ones, whatever the buffer type. Records are
built by encode_record from Hypothesis-drawn messages, then cut short, bit-flipped, overwritten
or given lying length fields. Skipped when the extension is not built.
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from param_ids import case_id
from pocketmq.protocol import pull_body, record_codec
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag
from pocketmq.protocol.record_codec import encode_record

speedups = pytest.importorskip("pocketmq._speedups")

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
IPV4 = st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, (1 << 32) - 1))
IPV6 = st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535))
TEXT = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from("\x01\x02é中😀")),
    max_size=20,
)
# Properties as raw bytes, not always UTF-8: what a damaged or foreign record may hold.
RAW_PROPERTIES = st.lists(st.one_of(st.binary(max_size=6), st.sampled_from([b"\x01", b"\x02"])))
PROPERTIES = st.dictionaries(
    st.one_of(TEXT, st.sampled_from([MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                                     MessageConst.RETRY_TOPIC, MessageConst.TAGS])),
    TEXT, max_size=6,
)  # fmt: skip


@st.composite
def messages(draw: st.DrawFn) -> MessageExt:
    # Long topics (over 127 bytes) make version 2 records.
    topic = draw(st.one_of(st.text(min_size=1, max_size=12), st.just("T" * 200)))
    sys_flag = draw(st.one_of(st.just(0), INT32, st.sampled_from([SysFlag.COMPRESSED])))
    body = draw(st.binary(max_size=300))
    if sys_flag & SysFlag.COMPRESSED and draw(st.booleans()):
        body = zlib.compress(body)  # one that inflates
    return MessageExt(
        topic=topic,
        body=body,
        queue_id=draw(INT32),
        flag=draw(INT32),
        properties=draw(PROPERTIES),
        sys_flag=sys_flag,
        born_timestamp=draw(INT64),
        born_host=draw(st.one_of(IPV4, IPV4, IPV6)),
        store_host=draw(st.one_of(IPV4, IPV4, IPV6)),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
        store_timestamp=draw(INT64),
        queue_offset=draw(INT64),
        phy_offset=draw(INT64),
    )


@st.composite
def records(draw: st.DrawFn) -> bytes:
    raw_properties = draw(st.one_of(st.none(), RAW_PROPERTIES.map(b"".join)))
    return bytes(encode_record(draw(messages()), raw_properties))


def byte_damage(draw: st.DrawFn, raw: bytearray, kind: str) -> bytes:
    """``raw`` (not empty) cut short, grown, bit-flipped or overwritten, as ``kind`` says."""
    if kind == "cut":
        return bytes(raw[: draw(st.integers(0, len(raw)))])
    if kind == "grow":
        return bytes(raw + draw(st.binary(min_size=1, max_size=8)))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(raw) - 1))
            raw[at] ^= 1 << draw(st.integers(0, 7))
        return bytes(raw)
    assert kind == "overwrite"
    size = len(raw)
    at = draw(st.integers(0, size - 1))
    junk = draw(st.binary(min_size=1, max_size=8))
    raw[at : at + len(junk)] = junk
    return bytes(raw[:size])


@st.composite
def damaged(draw: st.DrawFn, record: bytes) -> bytes:
    """The record cut short, grown, bit-flipped, overwritten or with a lying length field."""
    raw = bytearray(record)
    kind = draw(st.sampled_from(["cut", "grow", "flip", "overwrite", "field"]))
    if kind != "field":
        return byte_damage(draw, raw, kind)
    # A length field (total, body, topic, properties) set to anything.
    body_at = 84 + (12 if raw[39] & SysFlag.BORNHOST_V6 else 0)
    body_at += 12 if raw[39] & SysFlag.STOREHOSTADDRESS_V6 else 0
    body_len = struct.unpack_from(">i", raw, body_at)[0]
    where = draw(st.sampled_from([0, body_at, body_at + 4 + body_len, len(raw) - 2]))
    where = min(where, len(raw) - 2)
    raw[where : where + 2] = draw(st.binary(min_size=2, max_size=2))
    return bytes(raw)


def outcome(func: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        result = func(*args, **kwargs)
    except Exception as exc:  # the point is to compare whatever is raised
        return "raises", (type(exc), str(exc))
    return "returns", typed(result)


def typed(value: Any) -> Any:
    """The value with the type of every field and item, so that 1 and True differ."""
    if isinstance(value, list):
        return [typed(v) for v in value]
    if dataclasses.is_dataclass(value):
        return (type(value), [typed(getattr(value, f.name)) for f in dataclasses.fields(value)])
    if isinstance(value, tuple):
        return tuple(typed(v) for v in value)
    if isinstance(value, dict):
        return {typed(k): typed(v) for k, v in value.items()}
    return type(value), value


def assert_same(name: str, reference: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    native = outcome(getattr(speedups, name), *args, **kwargs)
    assert native == outcome(reference, *args, **kwargs)


def assert_same_message(*args: Any, **kwargs: Any) -> None:
    assert_same("decode_message", record_codec.decode_message_py, *args, **kwargs)


def assert_same_body(body: bytes, restore: bool) -> None:
    assert_same("decode_pull_body", pull_body.decode_pull_body_py, body, restore)


def test_the_references_are_registered() -> None:
    assert speedups.REFERENCES["decode_message"] is record_codec.decode_message_py
    assert speedups.REFERENCES["decode_pull_body"] is pull_body.decode_pull_body_py


@given(records(), st.booleans())
def test_decode_message_of_good_records(record: bytes, inflate: bool) -> None:
    assert_same_message(record, inflate_body=inflate)
    assert_same_message(record, 0, False, inflate_body=inflate)


@given(st.data())
def test_decode_message_of_damaged_records(data: st.DataObject) -> None:
    record = data.draw(damaged(data.draw(records())))
    assert_same_message(record, inflate_body=data.draw(st.booleans()))


@given(st.binary(max_size=200))
def test_decode_message_of_random_bytes(raw: bytes) -> None:
    assert_same_message(raw)


@given(records(), st.binary(max_size=20), st.integers(-30, 30))
def test_decode_message_at_a_position(record: bytes, prefix: bytes, shift: int) -> None:
    buf = prefix + record
    assert_same_message(buf, len(prefix))
    assert_same_message(buf, len(prefix) + shift)
    assert_same_message(buf, pos=len(prefix) + shift, inflate_body=True)


@given(records())
def test_decode_message_from_every_buffer_type(record: bytes) -> None:
    padded = b"\0" * 7 + record + b"\0" * 5
    assert_same_message(bytearray(record))
    assert_same_message(memoryview(record))
    assert_same_message(memoryview(padded)[7:-5])
    assert_same_message(memoryview(padded), 7)
    assert_same_message(memoryview(padded)[::-1], 0)  # not contiguous
    assert_same_message(memoryview(record).cast("c"))
    with mmap.mmap(-1, len(padded)) as mapped:
        mapped[:] = padded
        assert_same_message(mapped, 7)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {}),
        ((None,), {}),
        (("text",), {}),
        ((b"\0" * 100, 1.5), {}),
        ((b"\0" * 100, True), {}),
        ((b"\0" * 100, 1 << 80), {}),
        ((b"\0" * 100, 0, False, True), {}),
        ((b"\0" * 100, 0), {"pos": 0}),
        ((b"\0" * 100,), {"check_crc": True}),
        ((b"\0" * 100,), {"inflate_body": 1}),
        ((b"\0" * 100,), {"nonsense": 1}),
        ((), {"buf": b"\0" * 100}),
    ],
    ids=case_id,
)
def test_decode_message_off_the_fast_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    assert_same_message(*args, **kwargs)


@given(records(), st.booleans())
def test_decode_message_with_crc_check(record: bytes, flip: bool) -> None:
    raw = bytearray(record)
    if flip:
        raw[-1] ^= 1
    assert_same_message(bytes(raw), 0, True)


def test_a_released_view_fails_as_the_reference() -> None:
    view = memoryview(b"\0" * 100)
    view.release()
    assert_same_message(view)


@given(st.lists(records(), max_size=6), st.booleans())
def test_decode_pull_body_of_good_bodies(recs: list[bytes], restore: bool) -> None:
    assert_same_body(b"".join(recs), restore)


@given(st.data())
def test_decode_pull_body_with_a_damaged_record(data: st.DataObject) -> None:
    recs = data.draw(st.lists(records(), min_size=1, max_size=4))
    at = data.draw(st.integers(0, len(recs) - 1))
    recs[at] = data.draw(damaged(recs[at]))
    assert_same_body(b"".join(recs), data.draw(st.booleans()))


@given(st.binary(max_size=300), st.booleans())
def test_decode_pull_body_of_random_bytes(raw: bytes, restore: bool) -> None:
    assert_same_body(raw, restore)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=3))
def test_decode_pull_body_off_the_fast_path(recs: list[bytes]) -> None:
    body = b"".join(recs)
    assert_same_body(bytearray(body), False)  # type: ignore[arg-type]
    assert_same_body(memoryview(body), True)  # type: ignore[arg-type]
    assert_same_body(body, 1)  # type: ignore[arg-type]
    assert_same("decode_pull_body", pull_body.decode_pull_body_py, body)
    assert_same("decode_pull_body", pull_body.decode_pull_body_py, body, restore_retry_topic=True)


# Names and values that recur across the records of a body, as a producer's do: more names
# than the decoder keeps, names and values longer than it keeps, UTF-8 cut by a separator.
RECURRING_NAMES = st.sampled_from(
    [b"UNIQ_KEY", b"CLUSTER", b"TRACE_ON", b"RETRY_TOPIC", b"", b"\xe4\xb8", b"N" * 41]
    + [b"k%d" % i for i in range(9)]
)
RECURRING_VALUES = st.one_of(
    st.sampled_from([b"", b"true", b"DefaultCluster", b"\xe4\xb8\xad", b"\xe4", b"V" * 41]),
    st.binary(max_size=45),
)
RECURRING_PROPERTIES = st.lists(
    st.one_of(
        st.tuples(RECURRING_NAMES, RECURRING_VALUES).map(lambda nv: nv[0] + b"\x01" + nv[1]),
        st.binary(max_size=4),  # an item without a separator, or stray bytes
    ),
    max_size=12,
).map(lambda items: b"\x02".join(items) + (b"\x02" if len(items) % 2 else b""))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECURRING_PROPERTIES, min_size=1, max_size=8), st.booleans())
def test_decode_pull_body_with_recurring_properties(raws: list[bytes], restore: bool) -> None:
    """The decoder reuses the names and short values of earlier records of the same body."""
    body = b"".join(
        bytes(encode_record(MessageExt(topic="T", body=b"b", phy_offset=i), raw))
        for i, raw in enumerate(raws)
    )
    assert_same_body(body, restore)
    assert_same_message(body[: struct.unpack_from(">i", body)[0]])


# Sizes, timestamps and CRCs that recur across a body's records, or change between them.
RECURRING_NUMBERS = st.sampled_from([0, 1, -1, 1 << 40, -(1 << 63), (1 << 63) - 1])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(RECURRING_NUMBERS, RECURRING_NUMBERS, st.binary(max_size=3)),
        min_size=1, max_size=8,
    ),
    st.booleans(),
)  # fmt: skip
def test_decode_pull_body_with_recurring_numbers(
    drawn: list[tuple[int, int, bytes]], restore: bool
) -> None:
    """The decoder reuses the previous record's int for a store size, a timestamp or a body
    CRC of the same value (the body, drawn from few, decides the size and the CRC)."""
    body = b"".join(
        bytes(encode_record(MessageExt(topic="T", body=b, born_timestamp=born,
                                       store_timestamp=stored, phy_offset=i)))
        for i, (born, stored, b) in enumerate(drawn)
    )  # fmt: skip
    assert_same_body(body, restore)


def test_a_consumer_sees_the_uniq_key_and_the_first_topic() -> None:
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1", MessageConst.RETRY_TOPIC: "Orig"}
    body = bytes(encode_record(MessageExt(topic="%RETRY%g", body=b"b", properties=props)))
    body += bytes(encode_record(MessageExt(topic="%RETRY%g", body=b"c", phy_offset=9)))
    for decode in (speedups.decode_pull_body, pull_body.decode_pull_body_py):
        first, second = decode(body, True)
        assert (first.msg_id, first.topic) == ("U1", "Orig")
        assert (second.msg_id, second.topic) == ("7F00000100002A9F0000000000000009", "%RETRY%g")
        assert decode(body, False)[0].topic == "%RETRY%g"


def test_decoding_keeps_no_memory() -> None:
    good = bytes(encode_record(MessageExt(topic="T", body=b"x" * 1024, properties={"a": "b"})))
    bodies = [good * 32, good * 3 + good[:-1], good + b"\0\0"]

    def decode_all() -> None:
        for body in bodies:
            outcome(speedups.decode_pull_body, body, False)
            outcome(speedups.decode_message, body, inflate_body=True)

    tracemalloc.start()
    try:
        # The first rounds fill caches (the bound type, interned names, the reference's).
        for _ in range(100):
            decode_all()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            decode_all()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # A leaked body per call would be 300 KiB and more.
    assert grown < 64 * 1024
