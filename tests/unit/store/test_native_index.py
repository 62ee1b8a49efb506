"""The index inserts of a put in C (index_put_requests) against the pure-Python reference:
the same return and the same bytes for random index files and requests, and the same index
files after the same puts through IndexService, rolling over and with hash collisions.

Skipped when the extension is not built; `make test` checks that it is.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.clock import FakeClock
from pocketmq.protocol.message import SysFlag
from pocketmq.store import index_file, index_insert
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.index_file import IndexService
from pocketmq.store.layout import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from pocketmq.store.reserve import RESERVE_ALIGN

speedups = pytest.importorskip("pocketmq._speedups")

# Code points of every UTF-16 width, the key separator, and a lone surrogate now and then
# (the native side leaves that record to build_index, whose hash raises).
_CHARS = st.one_of(st.sampled_from(" a#é中😀\uffff"), st.characters(max_codepoint=0x7F))
KEY_TEXT = st.one_of(st.none(), st.text(_CHARS, max_size=24))
TOPIC = st.one_of(st.sampled_from(["T", "TopicTest", "话题", "😀"]), st.text(_CHARS, max_size=8))
FLAGS = st.sampled_from(
    [0, SysFlag.TRANSACTION_PREPARED_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE,
     SysFlag.TRANSACTION_ROLLBACK_TYPE, 1 | SysFlag.TRANSACTION_ROLLBACK_TYPE]
)  # fmt: skip


@st.composite
def requests(draw: st.DrawFn, max_size: int = 30) -> list[DispatchRequest]:
    """Requests in log order, now and then one again or older (a restart's re-dispatch)."""
    out = []
    phy = draw(st.integers(0, 1 << 40))
    ts = draw(st.integers(-5000, 1_800_000_000_000))
    for _ in range(draw(st.integers(0, max_size))):
        phy += draw(st.sampled_from([0, -1, 1, 150, 1 << 20]))
        ts += draw(st.sampled_from([0, 1, 999, 1000, 1 << 42, -2000]))
        out.append(
            DispatchRequest(
                topic=draw(TOPIC), queue_id=0, phy_offset=phy, size=100, tags_code=0,
                store_timestamp=ts, queue_offset=0, keys=draw(KEY_TEXT),
                uniq_key=draw(KEY_TEXT), sys_flag=draw(FLAGS),
            )
        )  # fmt: skip
    return out


@st.composite
def index_files(draw: st.DrawFn) -> tuple[bytearray, bytearray, int, int, int]:
    """(mapping, slot-page flags, reserved mark, slots, entries) of a random small index file:
    a random header and entries, some of them chained, slot pages partly reserved."""
    slot_num = draw(st.sampled_from([1, 3, 16, 1030, 3000]))
    index_num = draw(st.integers(1, 40))
    entries_start = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
    size = entries_start + index_num * INDEX_ENTRY_SIZE
    mm = bytearray(size)
    count = draw(st.integers(-1, index_num + 1))
    header = (
        draw(st.sampled_from([0, -1, 1_700_000_000_000, (1 << 63) - 1])),
        draw(st.integers(0, 1 << 50)),
        draw(st.integers(0, 1 << 40)),
        draw(st.integers(-1, 1 << 41)),
        draw(st.integers(0, 50)),
        count,
    )
    index_insert.HEADER.pack_into(mm, 0, *header)
    for n in range(1, max(min(count, index_num), 1)):
        slot = INDEX_HEADER_SIZE + draw(st.integers(0, slot_num - 1)) * INDEX_SLOT_SIZE
        mm[slot : slot + 4] = n.to_bytes(4, "big")
        pos = entries_start + n * INDEX_ENTRY_SIZE
        mm[pos : pos + INDEX_ENTRY_SIZE] = draw(st.binary(min_size=20, max_size=20))
    pages = bytearray(draw(st.lists(st.sampled_from([0, 1, 1, 1]), min_size=0,
                                    max_size=entries_start // RESERVE_ALIGN + 2)))  # fmt: skip
    reserved = draw(st.one_of(st.just(size), st.integers(0, size)))
    return mm, pages, reserved, slot_num, index_num


@given(index_files(), requests(), st.integers(0, 5))
def test_same_return_and_bytes_as_the_reference(
    file: tuple[bytearray, bytearray, int, int, int], reqs: list[DispatchRequest], start: int
) -> None:
    mm, pages, reserved, slot_num, index_num = file
    native_mm = bytearray(mm)
    ref = index_insert.index_put_requests_py
    try:
        expected: object = ref(mm, pages, reserved, slot_num, index_num, reqs, start)
    except UnicodeEncodeError:
        # A lone surrogate: the native side stops before that record, so build_index raises.
        done = speedups.index_put_requests(
            native_mm, pages, reserved, slot_num, index_num, reqs, start
        )
        assert done < len(reqs)
        return
    got = speedups.index_put_requests(native_mm, pages, reserved, slot_num, index_num, reqs, start)
    assert got == expected
    assert native_mm == mm


def test_input_off_the_fast_path_goes_to_the_reference() -> None:
    mm = bytearray(INDEX_HEADER_SIZE + 4 * INDEX_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE)
    reqs = (DispatchRequest("T", 0, 10, 1, 0, 1, 0, "k", None, 0),)  # a tuple, not a list
    args = (bytearray(b"\x01"), 1 << 20, 4, 4, reqs, 0)
    assert speedups.index_put_requests(bytearray(mm), *args) == 1
    with pytest.raises(ZeroDivisionError):  # slot_num 0: the reference's own error
        speedups.index_put_requests(mm, bytearray(b"\x01"), 1 << 20, 0, 4, list(reqs), 0)


def _index_bytes(reqs_per_put: list[list[DispatchRequest]], native: bool, batch: bool) -> dict:
    """The index files after the puts, by name, through build_index_batch with one side or
    through build_index record by record."""
    saved = index_file.index_put_requests
    index_file.index_put_requests = (
        speedups.index_put_requests if native else index_insert.index_put_requests_py
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            service = IndexService(Path(tmp), 5, 9, clock=FakeClock())
            service.load()
            for reqs in reqs_per_put:
                if batch:
                    service.build_index_batch(reqs)
                else:
                    for r in reqs:
                        service.build_index(
                            r.topic, r.phy_offset, r.store_timestamp, r.sys_flag,
                            r.uniq_key, r.keys,
                        )  # fmt: skip
            service.flush()
            files = {f.name: bytes(f.mf.mm) for f in service.files}
            service.close()
            return files
    finally:
        index_file.index_put_requests = saved


_VALID_KEY = st.one_of(st.none(), st.text(st.sampled_from(" ab😀é"), max_size=12))


@settings(deadline=None)
@given(
    st.lists(
        st.lists(
            st.builds(
                lambda topic, keys, uniq, flag: (topic, keys, uniq, flag),
                st.sampled_from(["T", "U", "话题"]), _VALID_KEY, _VALID_KEY, FLAGS,
            ),
            max_size=12,
        ),
        max_size=8,
    )
)  # fmt: skip
def test_index_files_match_after_the_same_puts(puts: list[list[tuple]]) -> None:
    """5 slots (collisions in every chain) and 9 entries a file (files roll over)."""
    phy = 0
    reqs_per_put = []
    for put in puts:
        reqs = []
        for topic, keys, uniq, flag in put:
            reqs.append(DispatchRequest(topic, 0, phy, 50, 0, 1_700_000_000_000 + phy * 7,
                                        0, keys, uniq, flag))  # fmt: skip
            phy += 50
        reqs_per_put.append(reqs)
    reference = _index_bytes(reqs_per_put, native=False, batch=False)
    assert _index_bytes(reqs_per_put, native=False, batch=True) == reference
    assert _index_bytes(reqs_per_put, native=True, batch=True) == reference
