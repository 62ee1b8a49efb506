"""JSON config files under {store}/config, written atomically (ConfigManager.persist).

A write goes to ``name.tmp`` (fsynced), the current file is kept as ``name.bak``, and the temp
file is renamed over the original; the directory is fsynced so the rename survives power loss.
Loading falls back to the ``.bak`` when the main file is missing or unreadable.
"""

from __future__ import annotations

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
        StoreError: the file cannot be written (the previous version stays in place).
    """
    tmp = path.with_name(path.name + ".tmp")
    bak = path.with_name(path.name + ".bak")
    payload = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
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
