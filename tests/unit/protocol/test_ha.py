"""RocketMQ 4.x's HA frames: exact bytes, reads cut anywhere, and bad headers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol.ha import (
    MAX_FRAME_BODY,
    FrameReader,
    ReportReader,
    encode_frame_header,
    encode_report,
)


def test_exact_bytes() -> None:
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_frame_header(4096, 3) == bytes.fromhex("000000000000100000000003")
    assert encode_frame_header(7, 0) == bytes.fromhex("000000000000000700000000")
    with pytest.raises(ValueError):
        encode_report(-1)
    with pytest.raises(ValueError):
        encode_frame_header(0, MAX_FRAME_BODY + 1)


def _stream(frames: list[tuple[int, bytes]]) -> bytes:
    return b"".join(encode_frame_header(phy, len(body)) + body for phy, body in frames)


FRAMES = [(0, b"a" * 100), (100, b""), (100, b"bcd"), (103, bytes(range(256)) * 3)]


@pytest.mark.parametrize("seed", range(20))
def test_frames_survive_any_read_boundaries(seed: int) -> None:
    rng = random.Random(seed)
    data = _stream(FRAMES)
    reader = FrameReader()
    got: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        step = rng.choice([1, 2, 5, 11, 12, 13, 200, 1000])
        got += [(f.phy_offset, bytes(f.body)) for f in reader.feed(data[pos : pos + step])]
        pos += step
    assert got == FRAMES
    assert reader.buffered == 0


def test_frames_inside_one_read_are_views_of_it() -> None:
    data = _stream(FRAMES)
    frames = FrameReader().feed(data)
    assert [f.end_offset for f in frames] == [100, 100, 103, 871]
    assert frames[0].body.obj is data  # not copied


def test_a_bad_header_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        FrameReader().feed(encode_report(0) + (-1).to_bytes(4, "big", signed=True))
    with pytest.raises(RemoteProtocolError):
        FrameReader().feed((-5).to_bytes(8, "big", signed=True) + bytes(4))
    reader = FrameReader()
    reader.feed(bytes(5))
    with pytest.raises(RemoteProtocolError):
        reader.feed(bytes(3) + (MAX_FRAME_BODY + 1).to_bytes(4, "big"))


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=40))
def test_any_input_gives_frames_or_a_protocol_error(data: bytes, step: int) -> None:
    reader = FrameReader()
    try:
        for i in range(0, len(data), step):
            for frame in reader.feed(data[i : i + step]):
                assert frame.phy_offset >= 0
    except RemoteProtocolError:
        pass


def test_the_last_complete_report_counts() -> None:
    reader = ReportReader()
    assert reader.feed(encode_report(5)[:3]) is None
    assert reader.feed(encode_report(5)[3:] + encode_report(9) + encode_report(12)[:7]) == 9
    assert reader.feed(encode_report(12)[7:]) == 12
    with pytest.raises(RemoteProtocolError):
        reader.feed((-2).to_bytes(8, "big", signed=True))
