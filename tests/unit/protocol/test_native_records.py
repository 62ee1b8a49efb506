"""The extension's record and batch codecs (encode_records, place_records, decode_batch_body)
against their pure-Python references: the same bytes for random messages and batches, the same
exception for bad input, and nothing written outside the records' place in the buffer.

Skipped when the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native import TEXT, assert_same, outcome

from param_ids import case_id
from pocketmq.protocol import batch, properties, record_codec
from pocketmq.protocol.message import Host, Message, MessageExt, host_to_bytes

speedups = pytest.importorskip("pocketmq._speedups")

MAX_BODY = 4096
MAX_RECORD = 1 << 20
HOSTS: list[Host] = [("127.0.0.1", 0), ("10.1.2.3", 65535), ("::1", 10911), ("fe80::7:8", 1)]
STORE_HOSTS = [host_to_bytes(("192.168.0.9", 10911)), host_to_bytes(("2001:db8::1", 10911))]

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
# Mostly in range, sometimes just past it: the reference refuses those with MESSAGE_ILLEGAL.
NEAR_INT32 = st.one_of(INT32, st.sampled_from([1 << 31, -(1 << 31) - 1, 1 << 70]))
NEAR_INT64 = st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1), st.sampled_from([1 << 63, -(1 << 63) - 1])
)
BORN_TS = st.one_of(st.integers(0, (1 << 64) - 1), st.sampled_from([-1, 1 << 64]))
TOPIC = st.one_of(
    st.sampled_from(["T", "TopicTest", "%RETRY%g", "t" * 127, "t" * 128, "话题", ""]),
    st.text(min_size=1, max_size=20),
    TEXT,
)
PROPERTIES = st.dictionaries(
    st.one_of(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT"]), TEXT), TEXT, max_size=6
)


@st.composite
def messages(draw: st.DrawFn, valid_ints: bool = False) -> MessageExt:
    ints32 = INT32 if valid_ints else NEAR_INT32
    return MessageExt(
        topic=draw(TOPIC),
        body=draw(st.binary(max_size=300) | st.binary(min_size=MAX_BODY, max_size=MAX_BODY + 1)),
        queue_id=draw(ints32),
        flag=draw(ints32),
        properties=draw(PROPERTIES),
        sys_flag=draw(st.one_of(INT32, st.sampled_from([0x30, 0x10, 1 << 40]))),
        born_timestamp=draw(st.integers(0, (1 << 64) - 1) if valid_ints else BORN_TS),
        born_host=draw(st.sampled_from(HOSTS)),
        reconsume_times=draw(ints32),
        prepared_transaction_offset=draw(
            st.integers(-(1 << 63), (1 << 63) - 1) if valid_ints else NEAR_INT64
        ),
    )


def encode_both(msgs: list[MessageExt], store_host: bytes, max_record: int = MAX_RECORD) -> Any:
    """Both sides' outcomes; each side gets its own host cache, the native one pre-filled
    half the time (it defers to the reference on a miss)."""
    native_hosts = {h: host_to_bytes(h) for h in HOSTS[::2]}
    got = outcome(speedups.encode_records, msgs, store_host, native_hosts, MAX_BODY, max_record)
    want = outcome(record_codec.encode_records_py, msgs, store_host, {}, MAX_BODY, max_record)
    assert got == want
    return want


@given(st.lists(messages(), min_size=1, max_size=6), st.sampled_from(STORE_HOSTS))
def test_encode_records_gives_the_same_bytes_or_the_same_error(
    msgs: list[MessageExt], store_host: bytes
) -> None:
    encode_both(msgs, store_host)


@given(st.lists(messages(valid_ints=True), min_size=1, max_size=40), st.sampled_from(STORE_HOSTS))
def test_many_valid_messages_of_many_queues(msgs: list[MessageExt], store_host: bytes) -> None:
    kind, (_, value) = encode_both(msgs, store_host)
    if kind == "returns":
        data, sizes, sys_flags = value
        assert sum(sizes) == len(data) and len(sys_flags) == len(msgs)
        pos = 0
        for msg, size in zip(msgs, sizes, strict=True):
            decoded = record_codec.decode_message(data[pos : pos + size], check_crc=True)
            # Separators inside names or values do not survive the format: compare with what
            # the properties codec itself makes of them.
            text = properties.encode_properties_py(msg.properties)
            assert decoded.properties == properties.decode_properties_py(text)
            assert decoded.body == msg.body
            assert decoded.body_crc == zlib.crc32(msg.body) & 0x7FFFFFFF
            pos += size


class _Message(MessageExt):
    """A subclass: encode_records reads its attributes, not MessageExt's slots."""

    @property  # type: ignore[misc]
    def topic(self) -> str:
        return "Sub"

    @topic.setter
    def topic(self, value: str) -> None:
        pass


@given(st.lists(messages(valid_ints=True), min_size=1, max_size=8), st.sampled_from(STORE_HOSTS))
def test_subclasses_and_exact_messages_mixed(msgs: list[MessageExt], store_host: bytes) -> None:
    mixed: list[MessageExt] = []
    for i, msg in enumerate(msgs):
        if i % 2:
            sub = _Message("Sub", msg.body)
            sub.properties = msg.properties
            mixed.append(sub)
        else:
            mixed.append(msg)
    encode_both(mixed, store_host)


def test_a_message_missing_a_field_fails_alike() -> None:
    msg = MessageExt("T", b"b")
    del msg.flag
    kind, (exc_type, _) = encode_both([MessageExt("T", b"a"), msg], STORE_HOSTS[0])
    assert (kind, exc_type) == ("raises", AttributeError)


def test_a_record_just_over_the_limit_is_refused_alike() -> None:
    msg = MessageExt("T", b"x" * 100)
    kind, (_, (_, sizes, _)) = encode_both([msg], STORE_HOSTS[0])
    assert kind == "returns"
    kind, (exc_type, text) = encode_both([msg], STORE_HOSTS[0], max_record=sizes[0] - 1)
    assert (kind, exc_type) == ("raises", record_codec.RecordEncodeError)
    assert "does not fit a commitlog segment" in text


class _Bytes(bytes):
    pass


@pytest.mark.parametrize(
    "args",
    [
        ([MessageExt("T", bytearray(b"b"))], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),  # type: ignore[arg-type]
        ([MessageExt("T", _Bytes(b"b"))], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"b", properties={"a": 1})], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),  # type: ignore[dict-item]
        ([MessageExt("T", b"b", born_host=("nohost", 1))], STORE_HOSTS[0], {}, MAX_BODY, 1 << 20),
        ([MessageExt("T", b"b", born_host=("1.2.3.4", -1))], STORE_HOSTS[0], {}, 9, MAX_RECORD),
        ([MessageExt("T", b"b", queue_id=True)], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"b", flag="1")], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),  # type: ignore[arg-type]
        ([object()], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ((MessageExt("T", b"b"),), STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"b")], b"\x00" * 9, {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"b")], STORE_HOSTS[0], {}, 1 << 70, MAX_RECORD),
        ([MessageExt("T", b"b")], STORE_HOSTS[0], None, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"b" * 10)], STORE_HOSTS[0], {}, 9, MAX_RECORD),
        ([MessageExt("T\udc80", b"")], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("T", b"", properties={"k": "v" * 32765})], STORE_HOSTS[0], {}, 9, 1 << 20),
        ([MessageExt("T", b"", properties={"k": "v" * 32764})], STORE_HOSTS[0], {}, 9, 1 << 20),
        ([MessageExt("t" * 32768, b"")], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
        ([MessageExt("t" * 32767, b"")], STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD),
    ],
    ids=case_id,
)
def test_unusual_encode_input_behaves_as_the_reference(args: tuple[Any, ...]) -> None:
    # The caches are separate objects per side: the reference fills its own.
    native_args = (*args[:2], dict(args[2]) if isinstance(args[2], dict) else args[2], *args[3:])
    assert outcome(speedups.encode_records, *native_args) == outcome(
        record_codec.encode_records_py, *args
    )


def test_keywords_go_to_the_reference() -> None:
    msgs = [MessageExt("T", b"b")]
    assert_same("encode_records", msgs, STORE_HOSTS[0], {}, MAX_BODY, max_record_size=MAX_RECORD)
    assert_same("place_records", bytearray(200), 0, b"", 0, 0, queue_offsets=[])
    assert_same("decode_batch_body", data=b"")


# --- place_records ----------------------------------------------------------------------


def _records(n: int, v6: bool) -> tuple[bytes, list[int]]:
    host = ("::2", 9) if v6 else ("1.2.3.4", 9)
    msgs = [MessageExt(f"T{i}", bytes([i]) * i, born_host=host) for i in range(n)]
    data, sizes, _ = record_codec.encode_records_py(msgs, STORE_HOSTS[0], {}, MAX_BODY, MAX_RECORD)
    return data, sizes


def place_both(size: int, pos: Any, data: Any, phy: Any, ts: Any, qos: Any) -> None:
    """Both sides on equal buffers filled with a marker: the same outcome and the same bytes,
    so also nothing written outside [pos, pos + len(data))."""
    mine, theirs = bytearray(b"\xee" * size), bytearray(b"\xee" * size)
    got = outcome(speedups.place_records, mine, pos, data, phy, ts, qos)
    want = outcome(record_codec.place_records_py, theirs, pos, data, phy, ts, qos)
    assert got == want
    assert mine == theirs


@given(
    st.integers(1, 5),
    st.booleans(),
    st.integers(0, 64),
    st.integers(0, 1 << 40),
    st.lists(st.integers(0, 1 << 40), min_size=5, max_size=5),
)
def test_place_records_writes_the_same_bytes(
    n: int, v6: bool, pos: int, phy: int, qos: list[int]
) -> None:
    data, _ = _records(n, v6)
    place_both(len(data) + 80, pos, data, phy, 1_700_000_000_000, qos[:n])


def test_placed_records_decode_with_their_offsets() -> None:
    data, sizes = _records(3, False)
    buf = bytearray(len(data) + 10)
    speedups.place_records(buf, 10, data, 5000, 42, [7, 8, 9])
    first = record_codec.decode_message(bytes(buf[10 : 10 + sizes[0]]))
    assert (first.queue_offset, first.phy_offset, first.store_timestamp) == (7, 5000, 42)
    third = record_codec.decode_message(bytes(buf[10 + sizes[0] + sizes[1] :]))
    assert (third.queue_offset, third.phy_offset) == (9, 5000 + sizes[0] + sizes[1])


@st.composite
def bad_placements(draw: st.DrawFn) -> tuple[int, Any, Any, Any, Any, Any]:
    records, sizes = _records(draw(st.integers(1, 3)), draw(st.booleans()))
    data: Any = records
    qos: Any = list(range(len(sizes)))
    pos: Any = 0
    phy: Any = 0
    ts: Any = 0
    size = len(data)
    match draw(st.integers(0, 9)):
        case 0:
            size = len(data) - draw(st.integers(1, len(data)))  # does not fit the buffer
        case 1:
            pos = draw(st.sampled_from([-1, 1, 1 << 70]))
        case 2:
            qos = [*qos, 0] if draw(st.booleans()) else qos[:-1]  # not one per record
        case 3:
            cut = draw(st.integers(0, len(data) - 1))  # a truncated or grown record
            data = data[:cut] + (b"\x00" * draw(st.integers(0, 70)))
        case 4:
            data = struct.pack(">i", draw(st.sampled_from([0, -1, 63, 1 << 30]))) + data[4:]
        case 5:
            qos = [1 << 63, *qos[1:]]
        case 6:
            phy = draw(st.sampled_from([(1 << 63) - 1, -(1 << 63) - 1, 1.5]))
        case 7:
            ts = draw(st.sampled_from([1 << 63, None]))
        case 8:
            data = bytearray(data)
        case _:
            qos = tuple(qos)
    return size, pos, data, phy, ts, qos


@given(bad_placements())
def test_bad_placements_fail_alike_and_write_nothing_outside(
    case: tuple[int, Any, Any, Any, Any, Any],
) -> None:
    place_both(*case)


def test_place_records_on_read_only_or_odd_buffers() -> None:
    data, _ = _records(1, False)
    for buf in (bytes(len(data)), memoryview(bytearray(len(data) * 4)).cast("i"), None):
        assert outcome(speedups.place_records, buf, 0, data, 0, 0, [0]) == outcome(
            record_codec.place_records_py, buf, 0, data, 0, 0, [0]
        )


# --- decode_batch_body ------------------------------------------------------------------

BATCH_MESSAGES = st.lists(
    st.builds(
        Message,
        topic=st.just("T"),
        body=st.binary(max_size=200),
        flag=INT32,
        properties=st.dictionaries(
            st.text(max_size=10).filter(lambda s: "\x01" not in s and "\x02" not in s),
            st.text(max_size=20).filter(lambda s: "\x02" not in s),
            max_size=5,
        ),
    ),
    max_size=30,
)


@given(BATCH_MESSAGES)
def test_encode_batch_body_of_messages(msgs: list[Message]) -> None:
    assert_same("encode_batch_body", msgs)
    assert_same("encode_batch_body", tuple(msgs))
    assert speedups.encode_batch_body(iter(msgs)) == batch.encode_batch_body_py(msgs)


class Odd:
    """A message-like object with whatever fields a caller passes."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class Props(dict[str, str]):
    pass


@pytest.mark.parametrize(
    "msg",
    [
        Message("T", b"b", 2**31, {}),
        Message("T", b"b", -(2**31) - 1, {}),
        Message("T", b"b", True, {}),
        Message("T", "text", 0, {}),  # type: ignore[arg-type]
        Message("T", bytearray(b"b"), 0, {}),  # type: ignore[arg-type]
        Message("T", b"b", 0, {"k": 1}),  # type: ignore[dict-item]
        Message("T", b"b", 0, Props(k="v")),
        Message("T", b"b", 0, {"k": "\ud800"}),  # no UTF-8 form
        Message("T", b"b", 0, {"k": "v" * 32764}),  # 32767 bytes of properties: the limit
        Message("T", b"b", 0, {"k": "v" * 32765}),
        Message("T", b"b", 0, {"k": "\u00e9" * 16383}),  # the limit counted in UTF-8 bytes
        Odd(body=b"b", flag=0, properties={}),
        Odd(body=b"b", flag=0),
        Odd(flag=0, properties={}),
        None,
    ],
    ids=case_id,
)
def test_encode_batch_body_of_odd_messages(msg: Any) -> None:
    assert_same("encode_batch_body", [Message("T", b"first", 1, {"a": "b"}), msg])


@pytest.mark.parametrize("args", [(), ([], 1), (None,), (7,), ("ab",)], ids=case_id)
def test_encode_batch_body_of_bad_arguments(args: tuple[Any, ...]) -> None:
    assert_same("encode_batch_body", *args)


@given(BATCH_MESSAGES)
def test_decode_batch_body_of_encoded_batches(msgs: list[Message]) -> None:
    body = batch.encode_batch_body(msgs)
    assert_same("decode_batch_body", body)
    decoded = speedups.decode_batch_body(body)
    assert [(f, b, p) for f, b, p in decoded] == [(m.flag, m.body, m.properties) for m in msgs]


@given(BATCH_MESSAGES, st.data())
def test_decode_batch_body_of_damaged_batches(msgs: list[Message], data: st.DataObject) -> None:
    body = bytearray(batch.encode_batch_body(msgs) or b"\x00")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    assert_same("decode_batch_body", bytes(body[:cut]))
    assert_same("decode_batch_body", bytes(body))


@given(st.binary(max_size=200))
def test_decode_batch_body_of_noise(noise: bytes) -> None:
    assert_same("decode_batch_body", noise)


@pytest.mark.parametrize(
    "arg", [bytearray(b""), memoryview(b""), _Bytes(b""), None, "", b"\xff\xfe\x01"], ids=case_id
)
def test_decode_batch_body_of_other_types(arg: Any) -> None:
    assert_same("decode_batch_body", arg)


# --- batch_messages ---------------------------------------------------------------------

BASES = st.builds(
    MessageExt,
    topic=TOPIC,
    body=st.just(b""),
    queue_id=INT32,
    properties=PROPERTIES,
    sys_flag=INT32,
    born_timestamp=st.integers(0, 1 << 50),
    born_host=st.sampled_from(HOSTS),
    reconsume_times=INT32,
    # Store fields, which put_again resets.
    queue_offset=st.integers(0, 9),
    msg_id=st.sampled_from(["", "X"]),
)


class _Message(MessageExt):
    """Not the exact MessageExt: the native side hands it to the reference."""


def _same_messages(base: MessageExt, body: Any) -> None:
    got = outcome(speedups.batch_messages, base, body)
    expected = outcome(batch.batch_messages_py, base, body)
    assert got == expected
    if got[0] == "returns":
        assert [type(m) for m in got[1][1]] == [MessageExt] * len(got[1][1])
        # Each message owns its properties: none is the base's or another's.
        props = [id(m.properties) for m in got[1][1]] + [id(base.properties)]
        assert len(set(props)) == len(props)


@given(BASES, BATCH_MESSAGES)
def test_batch_messages_of_encoded_batches(base: MessageExt, msgs: list[Message]) -> None:
    _same_messages(base, batch.encode_batch_body(msgs))


@given(BASES, BATCH_MESSAGES, st.data())
def test_batch_messages_of_damaged_batches(
    base: MessageExt, msgs: list[Message], data: st.DataObject
) -> None:
    body = bytearray(batch.encode_batch_body(msgs) or b"\x00")
    at = data.draw(st.integers(0, len(body) - 1))
    body[at] = data.draw(st.integers(0, 255))
    _same_messages(base, bytes(body[: data.draw(st.integers(0, len(body)))]))
    _same_messages(base, bytes(body))


def test_batch_messages_off_the_fast_path_go_to_the_reference() -> None:
    body = batch.encode_batch_body([Message("T", b"b", 3, {"K": "v"})])
    base = MessageExt(topic="T", body=b"", properties={"A": "1"})
    for args in ((base, bytearray(body)), (_Message("T", b""), body), (None, body)):
        _same_messages(*args)
    odd = MessageExt(topic="T", body=b"", properties=_Dict(A="1"))
    _same_messages(odd, body)


class _Dict(dict[str, str]):
    """Not an exact dict: the native side hands the base to the reference."""
