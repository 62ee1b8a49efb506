"""Shared by every test: store files are removed once a test is done with them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# A broker store preallocates about 1.5 GiB (a 1 GiB CommitLog segment, the index, consume
# queues); a full run starts dozens of servers, which would fill the CI disk.
_STORE_DIRS = ("commitlog", "consumequeue", "index")

# bench/native_check.sh runs tests under ASan and valgrind, tens of times slower: no deadlines.
# Nor the health check on input size: with this profile's settings some seeds draw too many
# oversized inputs (2 runs in 5 of `make test`'s ASan run stopped on it); the suite's own runs
# keep it.
settings.register_profile(
    "sanitizer",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    max_examples=50,
)


@pytest.fixture(autouse=True)
def _free_store_space(request: pytest.FixtureRequest) -> Iterator[None]:
    yield  # autouse fixtures tear down last: the test's servers have stopped by now
    tmp = request.node.funcargs.get("tmp_path")
    if isinstance(tmp, Path):
        for name in _STORE_DIRS:
            for d in list(tmp.rglob(name)):
                if d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)
