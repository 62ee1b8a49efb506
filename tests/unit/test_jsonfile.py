"""Atomic JSON files: the backup, the fallback to it, and failures that leave the last good
version in place."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import orjson
import pytest

from pocketmq import jsonfile
from pocketmq.errors import StoreError
from pocketmq.jsonfile import read_json, write_json_atomic, write_json_atomic_off_loop


def test_write_json_atomic_keeps_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    assert read_json(path) is None
    write_json_atomic(path, {"version": 1, "topics": {"A": 4}})
    assert read_json(path) == {"version": 1, "topics": {"A": 4}}
    assert not path.with_name("topics.json.bak").exists()
    write_json_atomic(path, {"version": 2, 5: "int keys become strings"})
    assert read_json(path) == {"version": 2, "5": "int keys become strings"}
    assert orjson.loads(path.with_name("topics.json.bak").read_bytes())["version"] == 1
    assert not path.with_name("topics.json.tmp").exists()


def test_read_json_falls_back_to_the_backup(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    path.write_bytes(b'{"v": 3, "tor')  # a torn write of the main file
    assert read_json(path) == {"v": 1}
    path.unlink()
    assert read_json(path) == {"v": 1}
    path.with_name("offsets.json.bak").write_bytes(b"\x00garbage")
    path.write_bytes(b"not json either")
    with pytest.raises(StoreError, match="no readable copy"):
        read_json(path)


def test_write_json_atomic_reports_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StoreError, match="cannot write"):
        write_json_atomic(blocker / "x.json", {"a": 1})


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize(
    "value",
    [10**20, -(2**64), {"nested": [1, 2**70]}, object()],
    ids=["int-over-64-bits", "negative-over-64-bits", "nested", "not-json"],
)
def test_an_unserializable_value_leaves_the_good_files_alone(tmp_path: Path, value: object) -> None:
    path = tmp_path / "topics.json"
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    before = _files(tmp_path)
    with pytest.raises(StoreError, match=r"cannot write .*topics\.json: .*not serializable"):
        write_json_atomic(path, {"v": 3, "perm": value})
    assert _files(tmp_path) == before  # no temp file, main and backup untouched
    assert read_json(path) == {"v": 2}
    write_json_atomic(path, {"v": 4})  # later writes work
    assert read_json(path) == {"v": 4}


def test_a_failed_write_removes_its_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "offsets.json"
    write_json_atomic(path, {"v": 1})
    before = _files(tmp_path)

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(StoreError, match="No space left on device"):
        write_json_atomic(path, {"v": 2})
    assert _files(tmp_path) == before
    assert read_json(path) == {"v": 1}


def test_off_loop_writes_go_to_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "consumerOffset.json"
    threads: list[threading.Thread] = []
    replace = jsonfile._replace

    def recording(p: Path, payload: bytes) -> None:
        threads.append(threading.current_thread())
        replace(p, payload)

    monkeypatch.setattr(jsonfile, "_replace", recording)
    value = {"offsetTable": {"T@g": {0: 5}}}
    asyncio.run(write_json_atomic_off_loop(path, value))
    assert read_json(path) == {"offsetTable": {"T@g": {"0": 5}}}
    assert threads and threads[0] is not threading.main_thread()
    with pytest.raises(StoreError, match="not serializable"):
        asyncio.run(write_json_atomic_off_loop(path, {"x": 1 << 70}))  # refused on the loop
    assert read_json(path) == {"offsetTable": {"T@g": {"0": 5}}}


def test_a_write_serialized_before_one_in_the_file_leaves_it_alone(tmp_path: Path) -> None:
    """An off-loop write whose thread reaches the file after a newer write (made on the loop
    meanwhile, say by a stopping broker) must not put the older value back."""
    path = tmp_path / "delayOffset.json"
    older = jsonfile._serialize(path, {"v": 1})
    older_version = next(jsonfile._versions)
    write_json_atomic(path, {"v": 2})
    jsonfile._write_version(path, older, older_version)
    assert read_json(path) == {"v": 2}
