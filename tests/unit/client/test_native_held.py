"""hold_messages and release_messages, the C extension's against their pure-Python references
(client/process_queue.py): the same return values and the same dict afterwards (its keys in
order, each mapped to the same object), for batches with offsets held already, repeated within
the batch, negative or beyond 64 bits, and for input off the fast path (a tuple, a subclass, a
bytearray body, a str offset). Skipped when the extension is not built."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client import process_queue
from pocketmq.protocol.message import MessageExt

speedups = pytest.importorskip("pocketmq._speedups")

OFFSETS = st.one_of(st.integers(-3, 40), st.sampled_from([1 << 63, -(1 << 70), 1 << 80]))


class SubMessage(MessageExt):
    __slots__ = ()


@st.composite
def batches(draw: st.DrawFn) -> list[MessageExt]:
    out = []
    for offset in draw(st.lists(OFFSETS, max_size=12)):
        kind = draw(st.sampled_from(["plain", "plain", "plain", "sub", "bytearray", "str"]))
        body: Any = draw(st.binary(max_size=5))
        if kind == "bytearray":
            body = bytearray(body)
        msg = (SubMessage if kind == "sub" else MessageExt)(topic="T", body=body)
        msg.queue_offset = str(offset) if kind == "str" else offset  # type: ignore[assignment]
        out.append(msg)
    return out


def outcome(func: Any, held: dict[Any, Any], msgs: Any) -> tuple[Any, list[tuple[Any, int]]]:
    try:
        result: Any = func(held, msgs)
    except Exception as exc:  # the point is to compare whatever is raised
        result = (type(exc), str(exc))
    return result, [(k, id(v)) for k, v in held.items()]


@given(batches(), batches(), st.booleans())
def test_hold_and_release_match_the_references(
    first: list[MessageExt], second: list[MessageExt], as_tuple: bool
) -> None:
    native_held: dict[Any, Any] = {}
    python_held: dict[Any, Any] = {}
    for batch in (first, second):
        arg: Any = tuple(batch) if as_tuple else batch
        assert outcome(speedups.hold_messages, native_held, arg) == outcome(
            process_queue.hold_messages_py, python_held, arg
        )
    for batch in (second, first):
        assert outcome(speedups.release_messages, native_held, batch) == outcome(
            process_queue.release_messages_py, python_held, batch
        )


def test_the_references_are_registered() -> None:
    assert speedups.REFERENCES["hold_messages"] is process_queue.hold_messages_py
    assert speedups.REFERENCES["release_messages"] is process_queue.release_messages_py
