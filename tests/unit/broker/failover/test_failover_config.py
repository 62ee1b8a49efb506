"""The failover settings of broker.conf: off by default, on with the ZooKeeper address, and
refused when they cannot work."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.failover import FailoverSettings
from pocketmq.broker.failover.epoch_file import LocalEpochHistory
from pocketmq.broker.failover.model import EpochEntry, FailoverError
from pocketmq.errors import ConfigError
from pocketmq.store.config import StoreConfig


def test_off_by_default() -> None:
    assert not BrokerConfig().failover_enabled


def test_on_with_one_setting() -> None:
    config = BrokerConfig.from_properties(
        {"failoverZkAddress": "10.0.0.1:2181,10.0.0.2:2181", "brokerId": "2",
         "brokerName": "broker-b", "listenPort": "10911"}
    )  # fmt: skip
    assert config.failover_enabled
    settings = FailoverSettings.from_broker_config(config, config.ha_listen_port)
    assert settings.zk_address == "10.0.0.1:2181,10.0.0.2:2181"
    assert settings.session_timeout_ms == 6000
    assert (settings.broker_name, settings.broker_id) == ("broker-b", 2)
    assert settings.ha_addr == "127.0.0.1:10912"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"failoverZkAddress": "zk1"}, "not host:port"),
        ({"failoverZkAddress": "zk1:99999"}, "not host:port"),
        ({"failoverZkAddress": "zk1:2181", "failoverSessionTimeoutMs": "10"}, "1000..120000"),
        ({"failoverZkAddress": "zk1:2181", "failoverZkRoot": "pocketmq"}, "absolute"),
        ({"failoverZkAddress": "zk1:2181", "brokerId": "0"}, "1 or more"),
        ({"failoverZkAddress": "zk1:2181", "brokerId": "1", "brokerRole": "SLAVE"}, "SYNC_MASTER"),
    ],
)
def test_refused_settings(props: dict[str, str], message: str) -> None:
    props = {"brokerId": "1", **props}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_local_epoch_history_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config" / "failoverEpochs.json"
    file = LocalEpochHistory(path)
    assert file.load() == []
    file.replace([EpochEntry(1, 0), EpochEntry(3, 900)])
    assert LocalEpochHistory(path).load() == [EpochEntry(1, 0), EpochEntry(3, 900)]
    with pytest.raises(FailoverError):
        file.replace([EpochEntry(3, 0), EpochEntry(2, 10)])
    path.write_text('{"not": "a history"}')
    path.with_name(path.name + ".bak").unlink(missing_ok=True)
    with pytest.raises(FailoverError):
        LocalEpochHistory(path).load()


def test_a_broker_whose_zookeeper_cannot_be_reached_refuses_to_start(tmp_path: Path) -> None:
    config = BrokerConfig(
        broker_id=1,
        listen_port=0,
        failover_zk_address=f"127.0.0.1:{_closed_port()}",
        failover_session_timeout_ms=1000,
        store=StoreConfig(store_path_root_dir=tmp_path),
    )
    with pytest.raises(ConfigError, match="cannot use ZooKeeper"):
        asyncio.run(Broker(config).start())
    # It stopped what it had started: the store is closed cleanly and can be opened again.
    assert not (tmp_path / "abort").exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
