"""ZooKeeper steps while the client has no session: kazoo's client_id is None between a
dropped connection and its re-established session, and a step landing there must fail the way
the coordinator's loop retries (a KazooException), never kill it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, KazooException

from pocketmq.broker.failover import zk_ops
from pocketmq.broker.failover.model import LiveBroker, ZkPaths

PATHS = ZkPaths.of("/pocketmq", "C", "broker-a")


class SessionlessClient:
    client_id = None

    def __init__(self, owner: int) -> None:
        self.owner = owner

    def get(self, path: str) -> tuple[bytes, Any]:
        return b"{}", SimpleNamespace(ephemeralOwner=self.owner, version=3)


def test_register_without_a_session_raises_what_the_loop_retries() -> None:
    me = LiveBroker(broker_id=1, addr="127.0.0.1:10911", ha_addr="127.0.0.1:10912", max_offset=0)
    with pytest.raises(ConnectionLoss) as raised:
        zk_ops.register(SessionlessClient(owner=7), PATHS, me)  # type: ignore[arg-type]
    assert isinstance(raised.value, KazooException)


def test_no_session_holds_the_master_lease() -> None:
    lease = zk_ops.Lease(master_version=3, epochs_version=1, sss_version=1)
    assert not zk_ops.check_lease(SessionlessClient(owner=7), PATHS, lease, 1)  # type: ignore[arg-type]
