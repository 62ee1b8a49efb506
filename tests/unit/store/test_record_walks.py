"""The store's walks over CommitLog records, on healthy and damaged segments: dispatch (pump),
recovery and ``store inspect``. Each stops where the data ends and reports damage with the file
and the offset."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from store_helpers import StoreFactory, msg, put_batch, put_ok, segment_paths

from pocketmq.protocol.record_codec import BLANK_MAGIC_CODE, POS_MAGIC, POS_PHY_OFFSET
from pocketmq.store import MessageStore, PutResult
from pocketmq.store.dispatch import DispatchRequest, ReputService
from pocketmq.store.inspect import inspect_store

SEGMENT = 4096


def fill(store: MessageStore, count: int = 60) -> list[PutResult]:
    """count messages over two topics and three queues, a batch among them; several segments."""
    results = [
        put_ok(store, msg("AB"[i % 2], bytes([65 + i % 26]) * (90 + i * 3), queue_id=i % 3))
        for i in range(count)
    ]
    batch = put_batch(store, [msg("C", b"c%d" % i, keys=f"c{i}") for i in range(5)])
    assert batch.ok
    results.append(batch)
    assert len(segment_paths(store.root)) >= 4
    return results


def offsets_of(results: list[PutResult]) -> list[int]:
    return [phy for r in results for phy in r.phy_offsets]


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def segment_of(root: Path, phy_offset: int) -> Path:
    return root / "commitlog" / f"{phy_offset - phy_offset % SEGMENT:020d}"


def blank_position(path: Path) -> int:
    """Where the blank record closing a full segment starts."""
    data = path.read_bytes()
    pos = 0
    while True:
        size, magic = struct.unpack_from(">iI", data, pos)
        if magic == BLANK_MAGIC_CODE:
            return pos
        pos += size


# --- dispatch ------------------------------------------------------------------------------


def test_pump_dispatches_every_record_in_log_order(open_small: StoreFactory) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    seen: list[DispatchRequest] = []
    reput = ReputService(store.commitlog, [seen.extend], store.config.delay_levels_ms)
    assert reput.pump() == len(offsets)
    assert [r.phy_offset for r in seen] == offsets
    assert reput.reput_from == store.max_phy_offset()
    assert [(r.topic, r.queue_id) for r in seen[:4]] == [("A", 0), ("B", 1), ("A", 2), ("B", 0)]
    assert [r.keys for r in seen[-5:]] == [f"c{i}" for i in range(5)]


def test_pump_stops_at_a_limit_and_resumes(open_small: StoreFactory) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    seen: list[DispatchRequest] = []
    reput = ReputService(store.commitlog, [seen.extend], store.config.delay_levels_ms)
    limit = offsets[17] + 1  # inside record 17: it starts before the limit
    assert reput.pump(limit) == 18
    assert reput.pump() == len(offsets) - 18
    assert [r.phy_offset for r in seen] == offsets


def test_pump_stops_at_a_damaged_record(
    open_small: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    victim = offsets[25]
    mf = store.commitlog.mfq.find(victim)
    assert mf is not None
    pos = victim - mf.file_from_offset + POS_MAGIC
    mf.mm[pos : pos + 4] = b"\xff" * 4
    seen: list[DispatchRequest] = []
    reput = ReputService(store.commitlog, [seen.extend], store.config.delay_levels_ms)
    with caplog.at_level(logging.ERROR, logger="pocketmq.store.dispatch"):
        assert reput.pump() == 25
    assert reput.reput_from == victim
    assert f"reput stopped at {victim}: bad magic code ffffffff" in caplog.text
    mf.mm[pos : pos + 4] = (0xDAA320A7).to_bytes(4, "big")  # so that the store closes cleanly
    assert reput.pump() == len(offsets) - 25


# --- recovery ------------------------------------------------------------------------------


def test_recovery_stops_at_a_record_that_claims_another_offset(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    store.close()
    victim = offsets[-8]
    patch(
        segment_of(store_root, victim),
        victim % SEGMENT + POS_PHY_OFFSET,
        (victim + 1).to_bytes(8, "big"),
    )
    again = open_small()
    assert again.max_phy_offset() == victim
    assert again.look_message_by_offset(offsets[-9]) is not None


def test_recovery_stops_at_a_blank_record_that_does_not_close_its_segment(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    fill(store)
    store.close()
    path = segment_paths(store_root)[-2]
    blank = blank_position(path)
    patch(path, blank, (SEGMENT - blank - 1).to_bytes(4, "big"))
    again = open_small()
    assert again.max_phy_offset() == int(path.name) + blank
    assert segment_paths(store_root)[-1].name == path.name  # later segments are cut away


# --- inspect -------------------------------------------------------------------------------


def test_inspect_counts_a_healthy_store(open_small: StoreFactory, store_root: Path) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    end = store.max_phy_offset()
    store.close()
    heard: list[tuple[str, int, int]] = []
    report = inspect_store(
        store_root, verify=True, config=store.config, progress=lambda *p: heard.append(p)
    )
    assert report.problems == []
    assert report.records == len(offsets)
    # One progress report per CommitLog file, the last with every byte done.
    files = len(segment_paths(store_root))
    assert len(heard) == files and heard[-1][1] == heard[-1][2]
    assert heard[-1][0] == f"verifying the commitlog ({files}/{files} files)"
    assert (report.commitlog_min_offset, report.commitlog_max_offset) == (0, end)
    assert report.commitlog_files == len(segment_paths(store_root))
    assert report.queues["C/0"].records == 5
    assert sum(q.cq_units for q in report.queues.values()) == len(offsets)


@pytest.mark.parametrize(
    "damage",
    ["bad-magic", "bad-crc", "other-offset", "short-blank", "garbage-after-end", "gap"],
)
def test_inspect_reports_damage_with_file_and_offset(
    open_small: StoreFactory, store_root: Path, damage: str
) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    end = store.max_phy_offset()
    store.close()
    path = segment_paths(store_root)[0]
    victim = stop = offsets[3]  # in the first segment
    if damage == "bad-magic":
        patch(path, victim + POS_MAGIC, b"\xff" * 4)
        expected = f"record at {victim}: bad magic code ffffffff"
    elif damage == "bad-crc":
        patch(path, victim + 100, b"\xff")
        expected = f"record at {victim}: body CRC mismatch"
    elif damage == "other-offset":
        patch(path, victim + POS_PHY_OFFSET, (victim + 1).to_bytes(8, "big"))
        expected = f"record at {victim}"
    elif damage == "short-blank":
        blank = blank_position(path)
        patch(path, blank, (SEGMENT - blank - 1).to_bytes(4, "big"))
        expected = f"blank record at {blank} has size {SEGMENT - blank - 1}, {SEGMENT - blank} left"
        stop = SEGMENT
    elif damage == "garbage-after-end":
        path = segment_of(store_root, end)
        patch(path, end % SEGMENT + 100, b"\x01")
        expected = f"non-zero bytes after the end of data at {end}"
        stop = end
    else:
        patch(path, victim, bytes(8))
        expected = f"data ends at {victim} but {segment_paths(store_root)[1].name} follows"
    report = inspect_store(store_root, verify=True, config=store.config)
    assert report.commitlog_max_offset == stop
    assert report.records == sum(o < stop for o in offsets)
    assert any(
        p.startswith(f"commitlog {path.name}: ") and expected in p for p in report.problems
    ), report.problems


def test_inspect_takes_a_torn_tail_for_the_end_of_data(
    open_small: StoreFactory, store_root: Path
) -> None:
    store = open_small()
    offsets = offsets_of(fill(store))
    store.close()
    torn = offsets[-1] % SEGMENT
    patch(segment_of(store_root, offsets[-1]), torn, bytes(SEGMENT - torn))
    report = inspect_store(store_root, verify=False, config=store.config)
    assert report.problems == []
    assert report.commitlog_max_offset == offsets[-1]
    assert report.records == len(offsets) - 1
