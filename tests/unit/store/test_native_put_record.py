"""A single put's record in one call (put_record: encode, queue offset, place, dispatch
request) against its pure-Python reference: the same request or None or exception, the same
bytes in the buffer and the same queue-offset table, for random messages, positions, limits
and tables; the native side writes nothing outside the record's place.

Skipped when the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_dispatch import outcome

from param_ids import case_id
from pocketmq.protocol.message import Host, MessageConst, MessageExt, SysFlag, host_to_bytes
from pocketmq.protocol.names import SCHEDULE_TOPIC, TIMER_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import commitlog, put_one

speedups = pytest.importorskip("pocketmq._speedups")

MAX_BODY = 2048
MAX_RECORD = 4096
HOSTS: list[Host] = [("127.0.0.1", 50000), ("::1", 10911)]
STORE_HOSTS = [host_to_bytes(("192.168.0.9", 10911)), host_to_bytes(("2001:db8::1", 10911))]
LEVELS = (1000, 5000)
_CHARS = st.one_of(st.sampled_from("a é中😀|"), st.characters(max_codepoint=0x7F))
TEXT = st.text(_CHARS, max_size=10)


def mostly(valid: st.SearchStrategy[Any], *odd: Any) -> st.SearchStrategy[Any]:
    """``valid`` nine times in ten, else one of ``odd``: values the reference refuses or the
    native side leaves to it, rare enough that most puts get through (``one_of`` would not
    weigh them so)."""
    return st.sampled_from(range(10)).flatmap(lambda i: st.sampled_from(odd) if i == 9 else valid)


PROPERTIES = st.dictionaries(
    st.sampled_from(
        [MessageConst.TAGS, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
         MessageConst.DELAY_TIME_LEVEL, "WAIT"]
    ),
    mostly(TEXT, "1", "2", "\ud800", "x" * 40_000),
    max_size=4,
)  # fmt: skip
FLAGS = mostly(
    st.sampled_from([0, 1, SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE,
                     SysFlag.TRANSACTION_ROLLBACK_TYPE]),
    0x30, 1 << 40,
)  # fmt: skip
QUEUE_VALUES = mostly(st.integers(0, 1 << 40), (1 << 63) - 1, 1 << 70, -5)


class _Message(MessageExt):
    """Not the exact MessageExt: the native side hands it to the reference."""


@st.composite
def puts(draw: st.DrawFn) -> tuple[Any, ...]:
    cls = draw(mostly(st.just(MessageExt), _Message))
    msg = cls(
        topic=draw(
            mostly(st.sampled_from(["T", "话题", "t" * 200]), SCHEDULE_TOPIC, TIMER_TOPIC, "")
        ),
        body=draw(mostly(st.binary(max_size=40), b"b" * MAX_BODY, b"b" * (MAX_BODY + 1))),
        queue_id=draw(mostly(st.integers(0, 2), 1 << 31)),
        properties=draw(PROPERTIES),
        sys_flag=draw(FLAGS),
        born_host=draw(st.sampled_from(HOSTS)),
        born_timestamp=draw(st.integers(0, 1 << 42)),
    )
    pos = draw(st.integers(0, 2000))
    size = pos + draw(mostly(st.integers(400, 600), -1, 0, 80))  # a record: 70-400 bytes here
    limit = draw(mostly(st.just(size), -1, pos + 100, pos + 200, 1 << 62))
    pos = draw(mostly(st.just(pos), 1 << 62))
    table = {(msg.topic, msg.queue_id): draw(QUEUE_VALUES)} if draw(st.booleans()) else {}
    phy = draw(mostly(st.integers(0, 1 << 50), (1 << 63) - 10))
    store_ts = draw(mostly(st.integers(0, 1 << 42), 1 << 63))
    store_host = draw(st.sampled_from(STORE_HOSTS))
    filled = draw(st.booleans())
    return msg, bytearray(b"\xa5" * size), pos, limit, store_host, table, phy, store_ts, filled


def put_both(put: tuple[Any, ...]) -> tuple[str, Any]:
    """Each side on its own buffer, table and host cache (the native one filled when
    ``filled``: on a miss it defers to the reference, which fills it); both outcomes, buffers
    and tables compared."""
    msg, buf, pos, limit, store_host, table, phy, store_ts, filled = put
    sides = []
    for func, hosts in (
        (speedups.put_record, {h: host_to_bytes(h) for h in HOSTS} if filled else {}),
        (commitlog.put_record_py, {}),
    ):
        mine, my_table = bytearray(buf), dict(table)
        result = outcome(
            func, mine, pos, limit, msg, store_host, hosts, MAX_BODY, MAX_RECORD, phy,
            store_ts, my_table, LEVELS,
        )  # fmt: skip
        sides.append((result, bytes(mine), my_table))
    assert sides[0] == sides[1]
    return sides[1][0]


@given(puts())
def test_put_record_as_the_reference(put: tuple[Any, ...]) -> None:
    put_both(put)


def test_a_record_that_fits_is_placed_with_its_offsets_and_takes_the_next_queue_offset() -> None:
    msg = MessageExt(topic="T", body=b"hello", queue_id=2, properties={MessageConst.TAGS: "a"},
                     born_host=HOSTS[0])  # fmt: skip
    buf = bytearray(4096)
    table = {("T", 2): 7}
    req = speedups.put_record(
        buf, 100, 4096, msg, STORE_HOSTS[0], {HOSTS[0]: host_to_bytes(HOSTS[0])}, MAX_BODY,
        MAX_RECORD, 5100, 42, table, LEVELS,
    )  # fmt: skip
    assert (req.phy_offset, req.queue_offset, req.store_timestamp) == (5100, 7, 42)
    assert table == {("T", 2): 8}
    assert not any(buf[:100]) and not any(buf[100 + req.size :])
    placed = decode_message(bytes(buf[100 : 100 + req.size]), check_crc=True)
    assert (placed.phy_offset, placed.queue_offset, placed.store_timestamp) == (5100, 7, 42)
    assert placed.body == b"hello"


@pytest.mark.parametrize("func", [speedups.put_record, commitlog.put_record_py])
def test_a_record_ending_past_the_limit_takes_nothing(func: Callable[..., Any]) -> None:
    msg = MessageExt(topic="T", body=b"x" * 100, born_host=HOSTS[0])
    hosts = {HOSTS[0]: host_to_bytes(HOSTS[0])}
    size = commitlog.encode_records([msg], STORE_HOSTS[0], hosts, MAX_BODY, MAX_RECORD)[1][0]
    buf = bytearray(4096)
    table: dict[tuple[str, int], int] = {}

    def put(limit: int) -> Any:
        return func(
            buf, 10, limit, msg, STORE_HOSTS[0], hosts, MAX_BODY, MAX_RECORD, 0, 1, table, LEVELS
        )

    assert put(10 + size - 1) is None
    assert table == {} and not any(buf)
    assert put(10 + size).size == size  # ending at the limit fits
    assert table == {("T", 0): 1}


class _Segment:
    """What put_one reads and moves of a CommitLog segment, over a bytearray."""

    def __init__(self, size: int, **fields: Any) -> None:
        self.mm = bytearray(size)
        self.file_from_offset = 1 << 20
        self.file_size = size
        self.wrote_position = 100
        self.reserved = size
        self.store_timestamp = 0
        self.__dict__.update(fields)

    def state(self) -> tuple[Any, ...]:
        return bytes(self.mm), self.wrote_position, self.store_timestamp


class _NoFiles:
    """A consume queue without the attributes put_one reads."""


def put_one_both(segment: dict[str, Any], put_args: Any, cq: Any) -> tuple[str, Any]:
    sides = []
    for func in (speedups.put_one, put_one.put_one_py):
        mf = _Segment(8192, **segment)
        table: dict[tuple[str, int], int] = {}
        args = (STORE_HOSTS[0], {HOSTS[0]: host_to_bytes(HOSTS[0])}, MAX_BODY, MAX_RECORD, table,
                LEVELS)  # fmt: skip
        msg = MessageExt(topic="T", body=b"x" * 50, born_host=HOSTS[0])
        result = outcome(func, msg, mf, put_args(args), cq, 42)
        sides.append((result, mf.state(), table))
    assert sides[0] == sides[1]
    return sides[1][0]


@pytest.mark.parametrize(
    ("segment", "put_args", "cq", "expected"),
    [
        ({}, tuple, None, "returns"),  # no consume queue yet: the unit is left to the caller
        ({}, list, None, "returns"),  # put_args of another type
        ({}, tuple, _NoFiles(), "raises"),  # the record is written, then the queue fails
        ({"wrote_position": "100"}, tuple, None, "raises"),
        ({"reserved": 10}, tuple, None, "returns"),  # does not fit: None, nothing written
    ],
    ids=case_id,
)
def test_put_one_off_its_fast_path_does_what_the_reference_does(
    segment: dict[str, Any], put_args: Any, cq: Any, expected: str
) -> None:
    assert put_one_both(segment, put_args, cq)[0] == expected
