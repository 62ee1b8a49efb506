"""A put's dispatch in C (dispatch_requests, consume_queue_put_requests) against the
pure-Python references: the same requests or the same exception for random puts, the same
return and bytes for random consume-queue files and requests, and the same consume-queue files
after the same puts through ConsumeQueue.put_requests (native, reference) and ConsumeQueue.put
record by record, across files and reservation chunks.

Skipped when the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag
from pocketmq.protocol.names import SCHEDULE_TOPIC, TIMER_TOPIC
from pocketmq.store import consume_queue, dispatch
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.layout import CQ_UNIT_SIZE
from pocketmq.store.reserve import CONSUME_QUEUE_RESERVE

speedups = pytest.importorskip("pocketmq._speedups")

_CHARS = st.one_of(st.sampled_from("a é中😀\ud800\uffff"), st.characters(max_codepoint=0x7F))
TEXT = st.text(_CHARS, max_size=12)
PROP_VALUE = st.one_of(TEXT, st.sampled_from(["", "1", "3", "99", "-2", "x"]), st.just(7))
PROPERTIES = st.dictionaries(
    st.sampled_from(
        [MessageConst.TAGS, MessageConst.KEYS, "UNIQ_KEY", MessageConst.DELAY_TIME_LEVEL,
         MessageConst.TIMER_OUT_MS, "WAIT"]
    ),
    PROP_VALUE,
    max_size=5,
)  # fmt: skip
TOPIC = st.one_of(st.sampled_from(["T", "话题", SCHEDULE_TOPIC, TIMER_TOPIC]), TEXT)
FLAGS = st.sampled_from(
    [0, 1, SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE,
     SysFlag.TRANSACTION_ROLLBACK_TYPE, -1]
)  # fmt: skip
INT64 = st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1), st.sampled_from([1 << 63, -(1 << 63) - 1])
)


class _Message(MessageExt):
    """Not the exact MessageExt: the native side hands it to the reference."""


def typed(value: Any) -> Any:
    """A value with the types of its parts, dataclasses as their fields' values."""
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, tuple):
        return tuple(typed(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value), [typed(getattr(value, f.name)) for f in dataclasses.fields(value)]
    return type(value), value


def outcome(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "returns", typed(func(*args))
    except Exception as exc:  # the point is to compare whatever is raised
        return "raises", (type(exc), str(exc))


@st.composite
def puts(draw: st.DrawFn) -> tuple[Any, ...]:
    msgs = [
        draw(st.sampled_from([MessageExt, MessageExt, MessageExt, _Message]))(
            topic=draw(TOPIC),
            body=b"",
            queue_id=draw(st.integers(0, 3)),
            properties=draw(PROPERTIES),
        )
        for _ in range(draw(st.integers(0, 8)))
    ]
    n = len(msgs)
    extra = draw(st.sampled_from([0, 0, 0, 1, -1]))  # now and then a list of another length
    sizes = draw(st.lists(st.one_of(st.integers(1, 5000), INT64), min_size=max(n + extra, 0),
                          max_size=max(n + extra, 0)))  # fmt: skip
    flags = [draw(FLAGS) for _ in range(n)]
    offsets = [draw(st.integers(0, 1 << 40)) for _ in range(n)]
    phy = draw(st.one_of(st.integers(0, 1 << 50), INT64))
    store_ts = draw(st.integers(0, 1 << 42))
    levels = draw(st.sampled_from([(), (1000, 5000, 10000)]))
    return msgs, sizes, flags, offsets, phy, store_ts, levels


@given(puts())
def test_dispatch_requests_as_the_reference(put: tuple[Any, ...]) -> None:
    got = outcome(speedups.dispatch_requests, *put)
    assert got == outcome(dispatch.dispatch_requests_py, *put)


def test_dispatch_requests_off_the_fast_path_goes_to_the_reference() -> None:
    msg = MessageExt(topic="T", body=b"", properties={MessageConst.TAGS: "a"})
    args = ([msg], (10,), [0], [0], 0, 1, ())  # a tuple of sizes
    assert typed(speedups.dispatch_requests(*args)) == typed(dispatch.dispatch_requests_py(*args))
    with pytest.raises(ValueError, match="zip"):  # the reference's own error
        speedups.dispatch_requests([msg], [10, 20], [0], [0], 0, 1, ())


@st.composite
def cq_requests(draw: st.DrawFn, max_size: int = 12) -> list[DispatchRequest]:
    """Requests mostly continuing queue T/0 from unit 3, now and then another queue, a gap,
    a unit again, a record out of consume queues or values past a unit's fields."""
    out = []
    qo = 3
    for _ in range(draw(st.integers(0, max_size))):
        qo += draw(st.sampled_from([1, 1, 1, 1, 0, 2, -1]))
        out.append(
            DispatchRequest(
                topic=draw(st.sampled_from(["T", "T", "T", "U"])),
                queue_id=draw(st.sampled_from([0, 0, 0, 1])), phy_offset=draw(INT64),
                size=draw(st.one_of(st.integers(1, 5000), st.sampled_from([1 << 31, -1]))),
                tags_code=draw(INT64), store_timestamp=0, queue_offset=qo, keys=None,
                uniq_key=None, sys_flag=draw(FLAGS),
            )
        )  # fmt: skip
    return out


@given(
    cq_requests(),
    st.integers(0, 5),
    st.integers(0, 12),
    st.integers(-1, 12),
    st.sampled_from([0, 2 * CQ_UNIT_SIZE, 1 << 40]),
    st.integers(0, 12 * CQ_UNIT_SIZE),
)
def test_consume_queue_units_as_the_reference(
    reqs: list[DispatchRequest], start: int, units_at: int, limit_units: int, file_from: int,
    size: int,
) -> None:  # fmt: skip
    mm = bytearray(b"\xa5" * size)
    native_mm = bytearray(mm)
    pos = units_at * CQ_UNIT_SIZE  # the requests' units start at 4: some calls write
    limit = limit_units * CQ_UNIT_SIZE
    args = (pos, limit, file_from, "T", 0, reqs, start)
    expected = consume_queue.consume_queue_put_requests_py(mm, *args)
    assert speedups.consume_queue_put_requests(native_mm, *args) == expected
    assert native_mm == mm


def test_consume_queue_units_off_the_fast_path_go_to_the_reference() -> None:
    reqs = (DispatchRequest("T", 0, 10, 1, 0, 1, 0, None, None, 0),)  # a tuple, not a list
    native_mm, mm = bytearray(40), bytearray(40)
    got = speedups.consume_queue_put_requests(native_mm, 0, 40, 0, "T", 0, reqs, 0)
    assert got == consume_queue.consume_queue_put_requests_py(mm, 0, 40, 0, "T", 0, reqs, 0)
    assert got == (1, 20, 11)
    assert native_mm == mm


def _queue_files(runs: list[list[DispatchRequest]], how: str, file_size: int) -> dict[str, bytes]:
    """The files of consume queue T/0 after the puts: through put_requests with the native or
    the reference function, or through put record by record."""
    saved = consume_queue.consume_queue_put_requests
    consume_queue.consume_queue_put_requests = (
        speedups.consume_queue_put_requests
        if how == "native"
        else consume_queue.consume_queue_put_requests_py
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cq = ConsumeQueue("T", 0, Path(tmp), file_size)
            cq.load()
            for reqs in runs:
                i = 0
                while i < len(reqs):
                    r = reqs[i]
                    if how == "put":
                        if dispatch.goes_to_consume_queue(r.sys_flag) and r.topic == "T":
                            cq.put(r.phy_offset, r.size, r.tags_code, r.queue_offset)
                        i += 1
                    elif r.topic == "T" and dispatch.goes_to_consume_queue(r.sys_flag):
                        i, _ = cq.put_requests(reqs, i)
                    else:
                        i += 1
            files = {mf.path.name: bytes(mf.mm) for mf in cq.mfq.files}
            files["max_physic_offset"] = str(cq.max_physic_offset).encode()
            cq.close()
            return files
    finally:
        consume_queue.consume_queue_put_requests = saved


def test_consume_queue_units_stop_only_at_a_record_of_a_consume_queue() -> None:
    """Where the call stops is a record that goes to a consume queue, or the end, even when the
    queue byte overflows a C int64 (put_requests takes the position it returns as such)."""
    prepared = SysFlag.TRANSACTION_PREPARED_TYPE
    reqs = [
        DispatchRequest("T", 0, 10, 1, 0, 1, 0, None, None, prepared),
        DispatchRequest("T", 0, 11, 1, 0, 1, 0, None, None, 0),
    ]
    args = (20, 40, (1 << 63) - 10, "T", 0, reqs, 0)
    expected = consume_queue.consume_queue_put_requests_py(bytearray(40), *args)
    assert expected == (1, 20, -1)
    assert speedups.consume_queue_put_requests(bytearray(40), *args) == expected


def test_put_requests_tells_how_far_the_queue_was_written(tmp_path: Path) -> None:
    """The queue offset past the last unit a run wrote, or -1 when every unit was present (a
    pump over records already dispatched): the store wakes waiters only for what it wrote."""
    cq = ConsumeQueue("T", 0, tmp_path, 7 * CQ_UNIT_SIZE)
    cq.load()
    try:
        reqs = [DispatchRequest("T", 0, i * 50, 50, 0, 0, i, None, None, 0) for i in range(10)]
        reqs.insert(3, DispatchRequest("U", 0, 999, 50, 0, 0, 0, None, None, 0))
        assert cq.put_requests(reqs, 0) == (3, 3)
        assert cq.put_requests(reqs, 4) == (11, 10)  # across a file
        assert cq.put_requests(reqs, 4) == (11, -1)
        assert cq.max_offset_in_queue() == 10
    finally:
        cq.close()


@settings(deadline=None, max_examples=40)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["T", "T", "T", "U"]), FLAGS,
                      st.sampled_from([1, 1, 1, 1, 1, 0, 3])),
            max_size=15,
        ),
        max_size=6,
    ),
    st.sampled_from([0, 5]),
)  # fmt: skip
def test_queue_files_match_after_the_same_puts(puts: list[list[tuple]], first: int) -> None:
    """Files of 7 units (runs cross files), units again (a restart) and gaps (blank units)."""
    qo, phy = first, 0
    runs = []
    for put in puts:
        reqs = []
        for topic, flag, step in put:
            in_queue = dispatch.goes_to_consume_queue(flag) and topic == "T"
            reqs.append(DispatchRequest(topic, 0, phy, 50, phy * 31, 0, qo, None, None, flag))
            phy += 50
            if in_queue:
                qo += step
        runs.append(reqs)
    reference = _queue_files(runs, "put", 7 * CQ_UNIT_SIZE)
    assert _queue_files(runs, "reference", 7 * CQ_UNIT_SIZE) == reference
    assert _queue_files(runs, "native", 7 * CQ_UNIT_SIZE) == reference


def test_a_run_longer_than_a_reservation_chunk() -> None:
    """The native call stops at the reservation mark; put reserves the next chunk, the call
    resumes: the files equal put's, record by record."""
    units = CONSUME_QUEUE_RESERVE.min_chunk // CQ_UNIT_SIZE * 3
    reqs = [DispatchRequest("T", 0, i * 100, 100, i, 0, i, None, None, 0) for i in range(units)]
    file_size = units * CQ_UNIT_SIZE * 2
    reference = _queue_files([reqs], "put", file_size)
    assert _queue_files([reqs], "native", file_size) == reference
