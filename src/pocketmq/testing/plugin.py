"""The pytest plugin of pocketmq.testing, registered through the ``pytest11`` entry point:

- ``pocketmq_server``: a pocketmq server (NameServer + broker + gRPC endpoint) with an empty
  store for one test, stopped and removed after it;
- ``pocketmq_session_server``: one server shared by every test of the session (a test sees
  what earlier ones left: give each its own topics and groups).

Both yield a ``pocketmq.testing.PocketMQServer``: ``namesrv_addr``, ``grpc_endpoint``,
``broker_addr``, ``store_dir``, ``create_topic(...)``, ``create_group(...)``. A teardown fails
when the server did not stop cleanly, with its log tail.

Loading the plugin imports only pytest and this module, and starts nothing: a server starts
only when a test asks for one of the fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pocketmq.testing.process import PocketMQServer


def _run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PocketMQServer]:
    from pocketmq.testing.process import PocketMQServer

    with PocketMQServer(parent_dir=tmp_path_factory.getbasetemp()) as server:
        yield server


@pytest.fixture
def pocketmq_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PocketMQServer]:
    """A pocketmq server with an empty store, for this test only."""
    yield from _run(tmp_path_factory)


@pytest.fixture(scope="session")
def pocketmq_session_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PocketMQServer]:
    """One pocketmq server for the whole test session."""
    yield from _run(tmp_path_factory)
