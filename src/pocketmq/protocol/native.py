"""The one boundary between pocketmq's pure-Python hot path and its C extension. No I/O here.

``pocketmq._speedups`` (C sources in src/pocketmq/_native, compiled by setup.py when a
compiler is present, skipped when not) implements some per-message functions of
``pocketmq.protocol``, ``pocketmq.store`` (a put's index entries, dispatch requests and
consume-queue units) and ``pocketmq.client`` (a process queue's pulled batches) again, with the
same results and the same errors; the pure-Python functions are the reference and the
fallback. A module with such a function defines the reference under a ``*_py`` name and binds
the public name with :func:`select`, so callers import the public name from where they always
did and never see which implementation runs.

The extension is active when it imports and ``POCKETMQ_PURE_PYTHON`` is unset, empty or ``0``;
the environment is read once, at import. :data:`IMPLEMENTATION` names the active side and
``pocketmq --version`` prints :data:`DESCRIPTION`. Whether or not it is active, an importable
extension gets every reference registered, so tests can compare both sides in one process.

This module reads ``os.environ`` and nothing else of ``os``; tests/unit/test_import_graph.py
allows exactly that.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Final, Literal, TypeVar, cast

F = TypeVar("F", bound=Callable[..., object])

PURE_PYTHON_ENV: Final = "POCKETMQ_PURE_PYTHON"


def _import_extension() -> tuple[ModuleType | None, str]:
    try:
        from pocketmq import _speedups
    except ImportError as exc:
        return None, f"pocketmq._speedups not built: {exc}"
    return _speedups, ""


EXTENSION, _MISSING = _import_extension()
_FORCED_PURE: Final = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")

IMPLEMENTATION: Final[Literal["native", "python"]] = (
    "native" if EXTENSION is not None and not _FORCED_PURE else "python"
)
DESCRIPTION: Final = (
    "native (pocketmq._speedups)"
    if IMPLEMENTATION == "native"
    else f"pure Python ({PURE_PYTHON_ENV}=1)"
    if _FORCED_PURE
    else f"pure Python ({_MISSING})"
)


def select(name: str, reference: F) -> F:
    """The implementation of ``name`` to bind: the extension's when active, else ``reference``.

    Args:
        name: the function's name in ``pocketmq._speedups`` (also its public name).
        reference: the pure-Python implementation; the extension calls it for input off its
            fast path, so both raise the same errors.

    Returns:
        The native function when the extension is active, else ``reference``.

    Raises:
        ImportError: the extension lacks ``name``: it was built from older sources.
    """
    if EXTENSION is None:
        return reference
    if not hasattr(EXTENSION, name):
        raise ImportError(
            f"{EXTENSION.__file__} has no {name}: rebuild it (pip install -e .) "
            f"or set {PURE_PYTHON_ENV}=1"
        )
    EXTENSION.REFERENCES[name] = reference
    if IMPLEMENTATION != "native":
        return reference
    return cast(F, getattr(EXTENSION, name))
