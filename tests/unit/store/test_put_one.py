"""A single message's put in one call (store/put_one.py, through ``MessageStore._append_one``)
leaves the store exactly as the general put does: same results, same files, same wake-ups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import msg, open_store, small_config

from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag
from pocketmq.store import message_store, put_one
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import PutResult

TX_TYPES = [
    SysFlag.TRANSACTION_NOT_TYPE,
    SysFlag.TRANSACTION_PREPARED_TYPE,
    SysFlag.TRANSACTION_COMMIT_TYPE,
    SysFlag.TRANSACTION_ROLLBACK_TYPE,
]
KEY = st.text(alphabet="ab c", max_size=6)

messages = st.lists(
    st.builds(
        lambda topic, queue_id, size, keys, tags, uniq, tx: msg(
            topic=topic,
            body=bytes([size % 251]) * size,
            queue_id=queue_id,
            tags=tags,
            keys=keys,
            sys_flag=tx,
            properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq} if uniq else {},
        ),
        st.sampled_from(["T", "Other"]),
        st.integers(0, 2),
        # Up to the small store's largest message: segments of 4 KiB roll every few records.
        st.integers(0, 2000),
        st.none() | KEY,
        st.none() | st.sampled_from(["a", "b"]),
        st.none() | KEY,
        st.sampled_from(TX_TYPES),
    ),
    min_size=1,
    max_size=40,
)


def store_files(root: Path) -> dict[str, bytes]:
    """Every file of the CommitLog, consume queues and index; a file never written (the
    prefault thread's next segment, all zeros) is left out."""
    out = {}
    for directory in ("commitlog", "consumequeue", "index"):
        for path in sorted((root / directory).rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if data.count(0) != len(data):
                    out[str(path.relative_to(root))] = data
    return out


def run(
    root: Path, msgs: list[MessageExt], one: bool, implementation: Any = None
) -> tuple[list[Any], list[Any], int]:
    """Each message put alone, the short way when ``one`` (through ``implementation`` of
    put_one when given), else the general way only."""
    if implementation is not None:
        active = message_store.put_one
        message_store.put_one = implementation
        try:
            return run(root, msgs, one)
        finally:
            message_store.put_one = active
    clock = FakeClock(1_700_000_000_000)
    store = open_store(small_config(root), clock)
    arrivals: list[tuple[str, int, int]] = []
    store.on_message_arrived = lambda topic, queue_id, offset: arrivals.append(
        (topic, queue_id, offset)
    )
    append_one = store._append_one
    taken = 0

    def counted(m: MessageExt) -> Any:
        nonlocal taken
        done = append_one(m) if one else None
        taken += done is not None
        return done

    store._append_one = counted  # type: ignore[method-assign]
    results = []
    for m in msgs:
        clock.advance(1)  # each record its own store time
        results.append(summary(store.append([m])))
    results.append(state(store))
    store.close()
    return results, arrivals, taken


def state(store: MessageStore) -> tuple[Any, ...]:
    """What the puts left in memory beside the files."""
    log = store.commitlog
    queues = store.all_queues()
    return (
        [(mf.wrote_position, mf.store_timestamp) for mf in log.mfq.files],
        log.topic_queue_table,
        [(q.topic, q.queue_id, q.max_physic_offset, q.mfq.max_offset()) for q in queues],
        (store.reput.reput_from, store.reput.last_store_timestamp),
        [
            (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
             f.hash_slot_count, f.index_count, f.dirty)
            for f in store.index.files
        ],
    )  # fmt: skip


def summary(r: PutResult) -> tuple[Any, ...]:
    return (r.status, r.phy_offsets, r.queue_offset, r.wrote_bytes, r.store_timestamp, r.detail)


# Each example opens two stores (tmp_path_factory, not a fixture of the test's).
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(msgs=messages)
def test_single_puts_leave_the_same_store_as_the_general_put(
    tmp_path_factory: Any, msgs: list[MessageExt]
) -> None:
    base = tmp_path_factory.mktemp("one")
    results, arrivals, taken = run(base / "one", msgs, True)
    expected, expected_arrivals, _ = run(base / "general", msgs, False)
    assert results == expected
    assert arrivals == expected_arrivals
    assert store_files(base / "one") == store_files(base / "general")
    assert taken <= len(msgs)


@SETTINGS
@given(msgs=messages)
def test_the_native_short_way_leaves_the_references_store(
    tmp_path_factory: Any, msgs: list[MessageExt]
) -> None:
    speedups = pytest.importorskip("pocketmq._speedups")
    base = tmp_path_factory.mktemp("impl")
    native = run(base / "native", msgs, True, speedups.put_one)
    assert native == run(base / "reference", msgs, True, put_one.put_one_py)
    assert store_files(base / "native") == store_files(base / "reference")


def test_a_steady_stream_of_single_puts_takes_the_short_way(tmp_path: Path) -> None:
    msgs = [msg(body=b"x" * 100, keys=f"k{i}", queue_id=i % 3) for i in range(300)]
    results, arrivals, taken = run(tmp_path / "one", msgs, True)
    # Not the first put of each segment (created by that put) nor the one closing it.
    assert taken >= 250
    assert [r[2] for r in results[:-1]] == [i // 3 for i in range(300)]
    assert arrivals == [("T", i % 3, i // 3) for i in range(300)]


def test_what_the_short_way_does_not_take_goes_the_general_way(open_small: Any) -> None:
    store: MessageStore = open_small()
    store.append([msg()])  # the first segment
    too_long = msg(properties={"P": "x" * 40_000})
    assert store._append_one(too_long) is None  # refusals are the general put's
    assert store.append([too_long]).status.value == "PROPERTIES_SIZE_EXCEEDED"
    store.commitlog._fail_next_write = True
    assert store._append_one(msg()) is None  # so is the fault hook
    assert store.append([msg()]).status.value == "UNKNOWN_ERROR"
    assert store._append_one(msg()) is None  # a failed write sticks
    assert store.append([msg()]).status.value == "SERVICE_NOT_AVAILABLE"
