"""Files written atomically, JSON above all: the broker's and NameServer's metadata under
{store}/config (ConfigManager.persist) and a broadcasting consumer's local offsets.

A write serializes the value first, then goes to ``name.tmp`` (fsynced); the current file is
kept as ``name.bak`` and the temp file is renamed over the original; the directory is fsynced
so that the rename survives power loss. Loading falls back to the ``.bak`` when the main file
is missing or unreadable. Nothing else here: what the files hold is the callers' business.

The fsyncs take milliseconds (a flush of the disk's cache, tens): a value written now and then
from an event loop (consumer offsets, every 5 s) is written by ``write_json_atomic_off_loop``,
serialized on the loop and written on a worker thread. Writes of one file land in the order
their values were serialized, whichever thread makes them: a write that reaches the file after
a newer one leaves it alone.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import itertools
import logging
import os
import threading
from pathlib import Path
from typing import Any

import orjson

from pocketmq.errors import StoreError

log = logging.getLogger(__name__)

# Each write's place in the order of serializations (taken where the value is serialized).
_versions = itertools.count()
_locks_lock = threading.Lock()
# Per file (a handful per server): the lock its writes take, the newest version written.
_file_locks: dict[Path, threading.Lock] = {}
_written: dict[Path, int] = {}


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace path with data as JSON; the previous version is kept as path.bak.

    Raises:
        StoreError: data cannot be serialized (an int beyond 64 bits, a non-JSON type), or the
            file cannot be written. Either way the previous version stays in place and no
            partial file is left behind.
    """
    _write_version(path, _serialize(path, data), next(_versions))


async def write_json_atomic_off_loop(path: Path, data: Any) -> None:
    """``write_json_atomic``, data serialized now and written on a worker thread.

    Raises:
        StoreError: as ``write_json_atomic``.
    """
    payload = _serialize(path, data)
    await asyncio.to_thread(_write_version, path, payload, next(_versions))


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Replace path with payload as ``write_json_atomic`` does (the previous version kept as
    path.bak).

    Raises:
        StoreError: the file cannot be written; the previous version stays in place.
    """
    _write_version(path, payload, next(_versions))


def _serialize(path: Path, data: Any) -> bytes:
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise StoreError(f"cannot write {path}: the value is not serializable: {exc}") from exc


def _write_version(path: Path, payload: bytes, version: int) -> None:
    key = Path(os.path.abspath(path))
    with _locks_lock:
        lock = _file_locks.setdefault(key, threading.Lock())
    with lock:
        if _written.get(key, -1) > version:
            return  # a value serialized later is in the file already
        _replace(path, payload)
        _written[key] = version


def _replace(path: Path, payload: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    bak = path.with_name(path.name + ".bak")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        if path.exists():
            os.replace(path, bak)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


class PersistedJson(abc.ABC):
    """A value kept in the JSON file ``path`` (``encode``), written when it has changed
    (``_dirty``)."""

    path: Path
    _dirty: bool

    @abc.abstractmethod
    def encode(self) -> Any:
        """The file's content."""

    def persist(self) -> None:
        if self._dirty:
            self._dirty = False
            write_json_atomic(self.path, self.encode())

    async def persist_off_loop(self) -> None:
        """``persist``, the file written and synced on a worker thread (the periodic write)."""
        if self._dirty:
            self._dirty = False
            try:
                await write_json_atomic_off_loop(self.path, self.encode())
            except BaseException:
                # Not written, or cancelled (a stopping broker): the next persist writes it.
                self._dirty = True
                raise


def read_json(path: Path) -> Any | None:
    """The JSON in path, else in path.bak, else None if neither exists.

    Raises:
        StoreError: both copies exist but neither parses.
    """
    bak = path.with_name(path.name + ".bak")
    errors = []
    for candidate in (path, bak):
        try:
            return orjson.loads(candidate.read_bytes())
        except FileNotFoundError:
            continue
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("cannot read %s: %s", candidate, exc)
            errors.append(f"{candidate}: {exc}")
    if errors:
        raise StoreError("no readable copy of " + str(path) + ": " + "; ".join(errors))
    return None
