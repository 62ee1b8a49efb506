"""Files written atomically, JSON above all: the broker's and NameServer's metadata under
{store}/config (ConfigManager.persist) and a broadcasting consumer's local offsets.

A write serializes the value first, then goes to ``name.tmp`` (fsynced); the current file is
kept as ``name.bak`` and the temp file is renamed over the original; the directory is fsynced
so that the rename survives power loss. Loading falls back to the ``.bak`` when the main file
is missing or unreadable. Nothing else here: what the files hold is the callers' business.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import orjson

from pocketmq.errors import StoreError

log = logging.getLogger(__name__)


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace path with data as JSON; the previous version is kept as path.bak.

    Raises:
        StoreError: data cannot be serialized (an int beyond 64 bits, a non-JSON type), or the
            file cannot be written. Either way the previous version stays in place and no
            partial file is left behind.
    """
    try:
        payload = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise StoreError(f"cannot write {path}: the value is not serializable: {exc}") from exc
    write_bytes_atomic(path, payload)


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Replace path with payload as ``write_json_atomic`` does (the previous version kept as
    path.bak).

    Raises:
        StoreError: the file cannot be written; the previous version stays in place.
    """
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
