"""Message properties, Java string hashes, message ids, the CommitLog record codec and batch
bodies."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.errors import ProtocolError
from pocketmq.protocol.batch import decode_batch_body, encode_batch_body
from pocketmq.protocol.message import (
    Host,
    Message,
    MessageConst,
    MessageExt,
    SysFlag,
    create_offset_msg_id,
    create_offset_msg_ids,
    decode_offset_msg_id,
    delay_property,
)
from pocketmq.protocol.properties import (
    decode_properties,
    encode_properties,
    java_string_hash,
    java_string_hash_concat,
    tags_code,
)
from pocketmq.protocol.record_codec import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordError,
    body_crc,
    decode_message,
    decode_record_info,
    encode_record,
    peek_record_size,
    record_length,
)

# --- properties ----------------------------------------------------------------------------


def test_encode_properties_writes_a_separator_after_every_pair() -> None:
    assert encode_properties({"k": "v"}) == "k\x01v\x02"
    assert encode_properties({"TAGS": "a", "KEYS": "k1 k2"}) == "TAGS\x01a\x02KEYS\x01k1 k2\x02"
    assert encode_properties({}) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k\x01v\x02", {"k": "v"}),  # as RocketMQ writes it: trailing separator
        ("k\x01v", {"k": "v"}),  # as some clients write it: no trailing separator
        ("a\x011\x02b\x012\x02", {"a": "1", "b": "2"}),
        ("a\x01\x02", {"a": ""}),  # empty value
        ("noseparator\x02a\x011\x02", {"a": "1"}),  # a pair without \x01 is skipped
        ("a\x01x\x01y\x02", {"a": "x\x01y"}),  # only the first \x01 splits
        ("", {}),
        ("\x02\x02", {}),
    ],
)
def test_decode_properties(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text) == expected


def test_properties_round_trip_keeps_order_and_unicode() -> None:
    props = {"UNIQ_KEY": "7F0000010001", "KEYS": "订单 42", "TAGS": "TagA", "emoji": "😀"}
    encoded = encode_properties(props)
    assert list(decode_properties(encoded).items()) == list(props.items())


# --- Java String.hashCode --------------------------------------------------------------------

# Values printed by Java 's String.hashCode on this machine's JDK.
JAVA_HASHES = [
    ("hello", 99162322),
    ("", 0),
    ("é", 233),
    ("中文", 646394),
    ("😀", 1772899),  # a surrogate pair: two UTF-16 code units
    ("a😀b", 57849694),
    ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
    ("Aa", 2112),
    ("BB", 2112),
    ("TopicTest", -1902610879),
    ("OrderID188", -1566895736),
    ("TagA", 2598919),
    ("x" * 5000, 1328282624),
    ("ab" * 3000, -521240136),
    ("a" * 4096, -92209152),  # the longest string hashed through the power table
    ("a" * 4097, 1436483681),  # the shortest one hashed by the loop
    ("café 日本" * 700, -316662400),  # long and non-ASCII
]


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES, ids=lambda v: repr(v)[:20])
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _reference_hash(s: str) -> int:
    raw = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.text(max_size=300))
def test_java_string_hash_agrees_with_the_definition(text: str) -> None:
    h = java_string_hash(text)
    assert h == _reference_hash(text)
    assert -(1 << 31) <= h < (1 << 31)


@given(st.text(max_size=50), st.text(max_size=50))
def test_java_string_hash_concat_continues_a_prefix_hash(prefix: str, suffix: str) -> None:
    # The index hashes "topic#key" by continuing the hash of "topic#".
    assert java_string_hash_concat(java_string_hash(prefix), suffix) == java_string_hash(
        prefix + suffix
    )


def test_java_string_hash_concat_long_suffix() -> None:
    suffix = "ab" * 3000
    assert java_string_hash_concat(java_string_hash("T#"), suffix) == java_string_hash(
        "T#" + suffix
    )


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919
    assert tags_code("TopicTest") == -1902610879
    assert tags_code("TagA") == tags_code("TagA")  # cached path


def test_body_crc_is_crc32_masked_to_31_bits() -> None:
    assert body_crc(b"") == 0
    assert body_crc(b"hello") == 907060870
    # CRC32("123456789") = 0xCBF43926: the high bit is dropped.
    assert body_crc(b"123456789") == 0x4BF43926
    assert body_crc(memoryview(b"123456789")) == 0x4BF43926


# --- offset message ids ------------------------------------------------------------------------


def test_offset_msg_id_ipv4() -> None:
    msg_id = create_offset_msg_id(("10.0.0.1", 10911), 12345)
    assert msg_id == "0A00000100002A9F0000000000003039"
    assert len(msg_id) == 32
    assert decode_offset_msg_id(msg_id) == (("10.0.0.1", 10911), 12345)
    assert decode_offset_msg_id(msg_id.lower()) == (("10.0.0.1", 10911), 12345)


def test_offset_msg_id_ipv6() -> None:
    msg_id = create_offset_msg_id(("2001:db8::1", 8080), 1 << 40)
    assert len(msg_id) == 56
    assert msg_id.startswith("20010DB8" + "0" * 22 + "01" + "00001F90")
    assert decode_offset_msg_id(msg_id) == (("2001:db8::1", 8080), 1 << 40)


@given(
    st.sampled_from([("10.0.0.1", 10911), ("2001:db8::1", 8080), ("127.0.0.1", 0)]),
    st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=5),
)
def test_offset_msg_ids_of_a_batch_are_each_offsets_id(host: Host, offsets: list[int]) -> None:
    assert create_offset_msg_ids(host, offsets) == [create_offset_msg_id(host, o) for o in offsets]


@pytest.mark.parametrize("bad", ["", "XYZ", "0A000001", "0A00000100002A9F00000000000030", "0" * 34])
def test_decode_offset_msg_id_rejects_bad_ids(bad: str) -> None:
    with pytest.raises(ProtocolError):
        decode_offset_msg_id(bad)


# --- records ------------------------------------------------------------------------------------


def _full_message(**changes: object) -> MessageExt:
    msg = MessageExt(
        topic="TopicA",
        body=b"hello world",
        queue_id=3,
        flag=7,
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"},
        sys_flag=SysFlag.COMPRESSED | SysFlag.TRANSACTION_COMMIT_TYPE,
        born_timestamp=1_700_000_000_123,
        born_host=("192.168.1.20", 50123),
        store_host=("10.0.0.2", 10911),
        reconsume_times=4,
        prepared_transaction_offset=98765,
        store_timestamp=1_700_000_000_456,
        queue_offset=42,
        phy_offset=8192,
    )
    for name, value in changes.items():
        setattr(msg, name, value)
    return msg


def test_record_length_formula() -> None:
    # 91 fixed bytes for IPv4 hosts and a 1-byte topic length.
    assert record_length(0, 0, 0, 0) == 91
    assert record_length(0, 100, 6, 30) == 91 + 100 + 6 + 30
    assert record_length(SysFlag.BORNHOST_V6, 10, 6, 0) == 91 + 12 + 10 + 6
    v6 = SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6
    assert record_length(v6, 10, 6, 0) == 91 + 24 + 10 + 6
    # A topic longer than 127 bytes takes a 2-byte length (magic v2).
    assert record_length(0, 0, 200, 0) == 91 + 1 + 200


def test_encode_record_exact_bytes() -> None:
    msg = _full_message()
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02"
    body = b"hello world"
    total = 91 + len(body) + len(b"TopicA") + len(props)
    expected = b"".join(
        [
            struct.pack(">i", total),
            bytes.fromhex("daa320a7"),
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
            struct.pack(">i", 3),  # queue id
            struct.pack(">i", 7),  # flag
            struct.pack(">q", 42),  # queue offset
            struct.pack(">q", 8192),  # physical offset
            struct.pack(">i", SysFlag.COMPRESSED | SysFlag.TRANSACTION_COMMIT_TYPE),
            struct.pack(">q", 1_700_000_000_123),  # born timestamp
            bytes([192, 168, 1, 20]) + struct.pack(">i", 50123),
            struct.pack(">q", 1_700_000_000_456),  # store timestamp
            bytes([10, 0, 0, 2]) + struct.pack(">i", 10911),
            struct.pack(">i", 4),  # reconsume times: 4 bytes, as RocketMQ's code writes it
            struct.pack(">q", 98765),  # prepared transaction offset
            struct.pack(">i", len(body)),
            body,
            bytes([6]),
            b"TopicA",
            struct.pack(">h", len(props)),
            props,
        ]
    )
    encoded = encode_record(msg)
    assert bytes(encoded) == expected
    assert len(encoded) == total
    assert peek_record_size(encoded, 0) == (total, MESSAGE_MAGIC_CODE)


def test_round_trip_every_field_ipv4() -> None:
    msg = _full_message()
    raw = bytes(encode_record(msg))
    out = decode_message(raw, check_crc=True)
    for name in (
        "topic",
        "body",
        "queue_id",
        "flag",
        "properties",
        "sys_flag",
        "born_timestamp",
        "born_host",
        "store_host",
        "reconsume_times",
        "prepared_transaction_offset",
        "store_timestamp",
        "queue_offset",
        "phy_offset",
    ):
        assert getattr(out, name) == getattr(msg, name), name
    assert out.store_size == len(raw)
    assert out.body_crc == body_crc(msg.body)
    assert out.msg_id == create_offset_msg_id(("10.0.0.2", 10911), 8192)
    assert out.tags == "TagA"
    assert out.keys == "k1 k2"
    assert out.uniq_key == "ABC"


def test_round_trip_ipv6_hosts_set_the_sys_flag_bits() -> None:
    msg = _full_message(born_host=("fe80::1", 1234), store_host=("2001:db8::7", 10911))
    raw = bytes(encode_record(msg))
    assert len(raw) == 91 + 24 + len(msg.body) + len(msg.topic) + len(
        encode_properties(msg.properties)
    )
    out = decode_message(raw, check_crc=True)
    assert out.born_host == ("fe80::1", 1234)
    assert out.store_host == ("2001:db8::7", 10911)
    assert out.sys_flag == msg.sys_flag | SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6
    assert len(out.msg_id) == 56
    assert decode_offset_msg_id(out.msg_id) == (("2001:db8::7", 10911), 8192)


def test_ipv6_bits_are_cleared_for_ipv4_hosts() -> None:
    msg = _full_message(sys_flag=SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
    out = decode_message(encode_record(msg))
    assert out.sys_flag == 0
    assert out.born_host == msg.born_host


def test_a_compressed_body_is_inflated_only_when_asked() -> None:
    raw = encode_record(_full_message(body=zlib.compress(b"x" * 5000), sys_flag=SysFlag.COMPRESSED))
    assert decode_message(raw).body == zlib.compress(b"x" * 5000)  # as stored
    out = decode_message(raw, inflate_body=True)
    assert out.body == b"x" * 5000 and out.sys_flag & SysFlag.COMPRESSED
    bad = encode_record(_full_message(body=b"not zlib", sys_flag=SysFlag.COMPRESSED))
    with pytest.raises(RecordError, match="does not inflate"):
        decode_message(bad, inflate_body=True)


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, None),
        ({"DELAY": "3"}, "DELAY"),
        ({"DELAY": "0"}, None),
        ({"DELAY": "-1"}, None),  # the store ignores a level below 1
        ({"DELAY": "soon"}, None),  # and one that is not a number
        ({"TIMER_DELIVER_MS": "1700000000000"}, "TIMER_DELIVER_MS"),
        ({"TIMER_DELAY_SEC": "5"}, "TIMER_DELAY_SEC"),
        ({"__STARTDELIVERTIME": "1700000000000"}, "__STARTDELIVERTIME"),
        ({"TIMER_DELAY_MS": ""}, None),
    ],
)
def test_delay_property(properties: dict[str, str], expected: str | None) -> None:
    assert delay_property(properties) == expected


def test_long_topic_uses_magic_v2() -> None:
    topic = "t" * 200
    msg = _full_message(topic=topic)
    raw = bytes(encode_record(msg))
    assert raw[4:8] == bytes.fromhex("daa320ab")
    assert peek_record_size(raw, 0)[1] == MESSAGE_MAGIC_CODE_V2
    props_len = len(encode_properties(msg.properties).encode())
    assert len(raw) == 91 + 1 + 200 + len(msg.body) + props_len
    body_end = len(raw) - props_len - 2 - 200 - 2
    assert raw[body_end : body_end + 2] == struct.pack(">H", 200)
    out = decode_message(raw, check_crc=True)
    assert out.topic == topic
    assert out.properties == msg.properties


def test_127_byte_topic_still_uses_magic_v1() -> None:
    raw = encode_record(_full_message(topic="t" * 127))
    assert peek_record_size(raw, 0)[1] == MESSAGE_MAGIC_CODE
    assert decode_message(raw).topic == "t" * 127


def test_empty_body_and_no_properties() -> None:
    msg = MessageExt(topic="T", body=b"")
    raw = encode_record(msg)
    assert len(raw) == 91 + 1
    out = decode_message(raw, check_crc=True)
    assert out.body == b""
    assert out.properties == {}


def test_decode_at_a_position_inside_a_larger_buffer() -> None:
    first = encode_record(_full_message(phy_offset=0))
    second = encode_record(_full_message(phy_offset=len(first), body=b"second"))
    buf = bytes(first + second)
    out = decode_message(buf, len(first))
    assert out.body == b"second"
    info = decode_record_info(buf, len(first), len(buf), check_crc=True)
    assert info.phy_offset == len(first)
    assert info.size == len(second)
    assert info.tags == "TagA"
    assert info.keys == "k1 k2"
    assert info.uniq_key == "ABC"
    assert info.store_timestamp == 1_700_000_000_456
    assert info.prepared_transaction_offset == 98765


def test_encode_rejects_what_a_record_cannot_carry() -> None:
    with pytest.raises(ProtocolError):
        encode_record(MessageExt(topic="", body=b"x"))
    with pytest.raises(ProtocolError):
        too_long = {"p": "v" * MAX_PROPERTIES_LENGTH}
        encode_record(MessageExt(topic="T", body=b"x", properties=too_long))


# --- batch bodies ---------------------------------------------------------------------------


def test_batch_body_round_trips_through_the_brokers_decoder() -> None:
    msgs = [
        Message("T", b"one", properties={"TAGS": "A", "KEYS": "k1 k2"}),
        Message("T", b"", 7, {"x": "y"}),
    ]
    parts = decode_batch_body(encode_batch_body(msgs))
    assert parts == [
        (0, b"one", {"TAGS": "A", "KEYS": "k1 k2"}),
        (7, b"", {"x": "y"}),
    ]


def test_batch_body_layout() -> None:
    # MessageDecoder.encodeMessages: size, magic 0, CRC 0, flag, body length, body, properties.
    props = b"a\x01b\x02"
    expected = struct.pack(">iiiii", 20 + 2 + 2 + 4, 0, 0, 3, 2) + b"hi"
    expected += struct.pack(">h", 4) + props
    assert encode_batch_body([Message("T", b"hi", 3, {"a": "b"})]) == expected
    assert encode_batch_body([]) == b""


def test_truncated_batch_body_is_refused() -> None:
    body = encode_batch_body([Message("T", b"hello", 0, {"k": "v"})])
    for cut in (1, 21, len(body) - 1):
        with pytest.raises(ProtocolError):
            decode_batch_body(body[:cut])


# --- decode errors --------------------------------------------------------------------------------


def _valid() -> bytearray:
    return encode_record(_full_message())


def test_bad_magic() -> None:
    raw = _valid()
    raw[4:8] = bytes.fromhex("deadbeef")
    with pytest.raises(RecordError, match="magic"):
        decode_message(raw)


def test_blank_magic_is_not_a_message() -> None:
    raw = struct.pack(">iI", 100, BLANK_MAGIC_CODE) + bytes(92)
    with pytest.raises(RecordError):
        decode_record_info(raw, 0, len(raw), check_crc=False)


@pytest.mark.parametrize("keep", [0, 4, 7, 8, 50, 90])
def test_truncated_records(keep: int) -> None:
    raw = bytes(_valid())[:keep]
    with pytest.raises(RecordError):
        decode_message(raw)


def test_record_cut_one_byte_short() -> None:
    raw = bytes(_valid())
    with pytest.raises(RecordError):
        decode_message(raw[:-1])
    with pytest.raises(RecordError):
        decode_record_info(raw, 0, len(raw) - 1, check_crc=False)


def test_total_size_disagrees_with_fields() -> None:
    raw = _valid()
    raw += b"\x00"
    struct.pack_into(">i", raw, 0, len(raw))  # one byte more than the fields account for
    with pytest.raises(RecordError, match="length mismatch"):
        decode_message(raw)


def test_body_length_overrun() -> None:
    raw = _valid()
    body_len_pos = 4 * 5 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8
    struct.pack_into(">i", raw, body_len_pos, 10_000)
    with pytest.raises(RecordError, match="body length"):
        decode_message(raw)
    struct.pack_into(">i", raw, body_len_pos, -1)
    with pytest.raises(RecordError, match="body length"):
        decode_message(raw)


def test_crc_mismatch_only_with_check_crc() -> None:
    raw = _valid()
    body_pos = 88
    raw[body_pos] ^= 0xFF
    with pytest.raises(RecordError, match="CRC"):
        decode_message(raw, check_crc=True)
    with pytest.raises(RecordError, match="CRC"):
        decode_record_info(raw, 0, len(raw), check_crc=True)
    # Without the check the record decodes, with the stored (now wrong) CRC.
    out = decode_message(raw, check_crc=False)
    assert out.body[0] == ord("h") ^ 0xFF


def test_sys_flag_claiming_ipv6_in_a_short_record() -> None:
    raw = encode_record(MessageExt(topic="T", body=b""))
    struct.pack_into(">i", raw, 36, SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
    with pytest.raises(RecordError):
        decode_message(raw)


def test_record_error_is_a_protocol_error() -> None:
    assert issubclass(RecordError, ProtocolError)


# --- property tests ---------------------------------------------------------------------------


@st.composite
def _plausible_headers(draw: st.DrawFn) -> bytes:
    """Random bytes behind a header that passes the first checks, so decoding goes deep."""
    data = bytearray(draw(st.binary(min_size=91, max_size=300)))
    total = draw(st.integers(91, len(data) + 2))
    magic = draw(st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2]))
    struct.pack_into(">iI", data, 0, total, magic)
    struct.pack_into(">i", data, 36, draw(st.sampled_from([0, 0x10, 0x20, 0x30, -1])))
    # BODY LENGTH (IPv4 position): small values leave the topic and properties to decode.
    struct.pack_into(">i", data, 84, draw(st.integers(-2, total - 88)))
    return bytes(data)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=400), _plausible_headers()), check_crc=st.booleans())
def test_arbitrary_bytes_decode_or_raise_record_error(data: bytes, check_crc: bool) -> None:
    try:
        info = decode_record_info(data, 0, len(data), check_crc)
    except RecordError:
        return
    assert 91 <= info.size <= len(data)


@st.composite
def _damaged_records(draw: st.DrawFn) -> bytes:
    msg = MessageExt(
        topic=draw(st.text(min_size=1, max_size=20)),
        body=draw(st.binary(max_size=40)),
        properties=draw(
            st.dictionaries(st.text("abc", min_size=1, max_size=3), st.text(max_size=5))
        ),
        born_host=draw(st.sampled_from([("127.0.0.1", 1), ("::1", 2)])),
        store_host=draw(st.sampled_from([("10.0.0.1", 3), ("fe80::2", 4)])),
    )
    raw = encode_record(msg)
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(raw) - 1))
        raw[pos] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_damaged_records(), check_crc=st.booleans())
def test_damaged_records_decode_or_raise_record_error(raw: bytes, check_crc: bool) -> None:
    try:
        msg = decode_message(raw, check_crc=check_crc)
    except RecordError:
        return
    assert msg.store_size <= len(raw)


@given(
    body=st.binary(max_size=200),
    topic=st.text(min_size=1, max_size=150).filter(lambda t: len(t.encode()) <= 300),
    props=st.dictionaries(
        st.text(
            st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=8
        ),
        st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=8),
        max_size=4,
    ),
    queue_offset=st.integers(0, 2**63 - 1),
    reconsume=st.integers(-(2**31), 2**31 - 1),
)
def test_round_trip_property(
    body: bytes, topic: str, props: dict[str, str], queue_offset: int, reconsume: int
) -> None:
    msg = MessageExt(
        topic=topic,
        body=body,
        properties=props,
        queue_offset=queue_offset,
        reconsume_times=reconsume,
    )
    raw = encode_record(msg)
    assert len(raw) == record_length(
        0, len(body), len(topic.encode()), len(encode_properties(props).encode())
    )
    out = decode_message(raw, check_crc=True)
    assert (out.topic, out.body, out.properties) == (topic, body, props)
    assert (out.queue_offset, out.reconsume_times) == (queue_offset, reconsume)


def test_message_const_names() -> None:
    assert MessageConst.KEYS == "KEYS"
    assert MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.DELAY_TIME_LEVEL == "DELAY"
