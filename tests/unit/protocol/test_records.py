"""The CommitLog record walk: how a segment's data ends (blank record, zeros, a short tail, the
limit) and how it reports damage, over bytes, memoryviews and mmaps."""

from __future__ import annotations

import mmap
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.protocol.message import MessageExt, ReadableBuffer
from pocketmq.protocol.record_codec import (
    BLANK_MAGIC_CODE,
    POS_BODY_CRC,
    POS_MAGIC,
    POS_PHY_OFFSET,
    encode_record,
)
from pocketmq.protocol.records import MIN_RECORD_SIZE, RecordWalk, Stop

BASE = 8192  # the segment's first CommitLog offset


def segment(
    bodies: list[bytes], size: int = 2048, blank: bool = False
) -> tuple[bytearray, list[int]]:
    """Records of topic T at BASE, then zeros (or a blank record filling the rest)."""
    data = bytearray()
    positions = []
    for i, body in enumerate(bodies):
        positions.append(len(data))
        data += encode_record(
            MessageExt(topic="T", body=body, queue_offset=i, phy_offset=BASE + len(data))
        )
    end = len(data)
    data += bytes(size - end)
    if blank:
        struct.pack_into(">iI", data, end, size - end, BLANK_MAGIC_CODE)
    return data, positions


def walk_all(walk: RecordWalk) -> list[tuple[int, int]]:
    return [(walk.pos, size) for size in walk.sizes()]


def test_a_segment_being_written_ends_with_zeros() -> None:
    data, positions = segment([b"a", b"bb" * 50, b""])
    walk = RecordWalk(data, base_offset=BASE)
    infos = list(walk.records(check_crc=True))
    assert [i.phy_offset - BASE for i in infos] == positions
    assert [i.queue_offset for i in infos] == [0, 1, 2]
    assert walk.stop is Stop.END_OF_DATA
    assert walk.pos == positions[-1] + infos[-1].size
    assert walk.detail == "end of data"


def test_a_full_segment_ends_with_its_blank_record() -> None:
    data, positions = segment([b"x" * 100] * 3, blank=True)
    walk = RecordWalk(data)
    assert [pos for pos, _ in walk_all(walk)] == positions
    assert walk.stop is Stop.BLANK
    assert walk.size == len(data) - walk.pos  # the blank closes the segment


@pytest.mark.parametrize("wrap", [bytes, memoryview, "mmap"])
def test_any_buffer_walks_the_same(wrap: object) -> None:
    data, positions = segment([b"m" * 10] * 4)
    buf: ReadableBuffer
    if wrap == "mmap":
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
    else:
        buf = wrap(data)  # type: ignore[operator]
    walk = RecordWalk(buf, base_offset=BASE)
    assert [i.phy_offset for i in walk.records()] == [BASE + p for p in positions]
    assert walk.stop is Stop.END_OF_DATA


def test_a_limit_stops_at_the_first_record_starting_past_it() -> None:
    data, positions = segment([b"r" * 30] * 5)
    walk = RecordWalk(data, positions[1], positions[3])
    assert [pos for pos, _ in walk_all(walk)] == positions[1:3]
    assert (walk.stop, walk.pos) == (Stop.LIMIT, positions[3])
    inside = RecordWalk(data, 0, positions[2] + 1)  # a record starting before the limit is in
    assert [pos for pos, _ in walk_all(inside)] == positions[:3]
    assert (inside.stop, inside.pos) == (Stop.LIMIT, positions[3])


def test_records_must_end_by_the_end() -> None:
    data, positions = segment([b"e" * 40] * 3)
    walk = RecordWalk(data, end=positions[2] + 20)  # the third record runs past a write position
    assert [pos for pos, _ in walk_all(walk)] == positions[:2]
    assert walk.stop is Stop.DAMAGED
    assert walk.pos == positions[2]
    assert walk.detail.startswith("record size ")
    short = RecordWalk(data, end=positions[2] + 7)  # not even a header fits
    assert len(walk_all(short)) == 2
    assert (short.stop, short.pos, short.detail) == (
        Stop.SHORT,
        positions[2],
        "truncated record header",
    )


@pytest.mark.parametrize(
    ("field", "value", "detail"),
    [
        (POS_MAGIC, b"\xff\xff\xff\xff", "bad magic code ffffffff"),
        (0, (MIN_RECORD_SIZE - 1).to_bytes(4, "big"), "record size 90 does not fit"),
        (0, (1 << 20).to_bytes(4, "big"), "record size 1048576 does not fit"),
        (POS_PHY_OFFSET, (BASE + 1).to_bytes(8, "big"), "the record says it is at offset 8193"),
    ],
    ids=["magic", "too-small", "too-large", "other-offset"],
)
def test_damage_stops_the_walk_where_it_is(field: int, value: bytes, detail: str) -> None:
    data, positions = segment([b"d" * 20] * 4)
    data[positions[2] + field : positions[2] + field + len(value)] = value
    walk = RecordWalk(data, base_offset=BASE)
    assert len(walk_all(walk)) == 2
    assert (walk.stop, walk.pos) == (Stop.DAMAGED, positions[2])
    assert detail in walk.detail


def test_offsets_are_checked_only_against_a_base_offset() -> None:
    data, _ = segment([b"o"] * 3)
    assert len(walk_all(RecordWalk(data))) == 3
    walk = RecordWalk(data, base_offset=BASE + 4096)
    assert walk_all(walk) == []
    assert (walk.stop, walk.pos) == (Stop.DAMAGED, 0)


def test_body_crc_is_checked_on_demand() -> None:
    data, positions = segment([b"c" * 10] * 3)
    data[positions[1] + POS_BODY_CRC] ^= 0x01
    assert len(list(RecordWalk(data).records())) == 3
    walk = RecordWalk(data)
    assert len(list(walk.records(check_crc=True))) == 1
    assert (walk.stop, walk.pos, walk.detail) == (Stop.DAMAGED, positions[1], "body CRC mismatch")


def test_stopping_early_leaves_pos_at_the_record_in_hand() -> None:
    data, positions = segment([b"s"] * 3)
    walk = RecordWalk(data)
    for _ in walk.sizes():
        if walk.pos == positions[1]:
            break
    assert walk.stop is None
    assert walk.pos == positions[1]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=600),
    cuts=st.lists(st.integers(0, 599), max_size=4),
    check_crc=st.booleans(),
)
def test_any_bytes_end_the_walk_with_a_reason(
    data: bytes, cuts: list[int], check_crc: bool
) -> None:
    good, _ = segment([b"h" * 7] * 3, size=600)
    buf = bytearray(good)
    for i, cut in enumerate(cuts):  # damage a few bytes, or take arbitrary bytes
        buf[cut] = data[i] if i < len(data) else 0
    if len(data) > 300:
        buf = bytearray(data)
    walk = RecordWalk(buf, base_offset=BASE)
    last = -1
    for info in walk.records(check_crc):
        assert last < walk.pos and walk.pos + info.size <= len(buf)
        last = walk.pos
    assert walk.stop is not None
    assert walk.stop is not Stop.LIMIT or walk.pos >= len(buf)
