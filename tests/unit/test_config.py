"""StoreConfig from RocketMQ-style broker.conf files, and the camelCase -> snake_case mapping."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.conf import camel_to_snake, read_properties
from pocketmq.errors import ConfigError
from pocketmq.store.config import BrokerRole, FlushDiskType, StoreConfig, parse_delay_levels

BROKER_CONF = """\
# A broker.conf as written for RocketMQ
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
brokerRole = ASYNC_MASTER
deleteWhen = 04;16
fileReservedTime = 48
flushDiskType = SYNC_FLUSH
storePathRootDir = {root}
mappedFileSizeCommitLog = 1048576
mappedFileSizeConsumeQueue = 6000
brokerIP1 = 192.168.1.10
listenPort = 10921
checkCRCOnRecover = false
messageDelayLevel = 500ms 1s 2m 1h 1d
maxMessageSize = 65536
messageIndexEnable = true
maxTransferCountOnMessageInMemory = 64
"""


@pytest.mark.parametrize(
    ("camel", "snake"),
    [
        ("flushDiskType", "flush_disk_type"),
        ("mappedFileSizeCommitLog", "mapped_file_size_commit_log"),
        ("storePathRootDir", "store_path_root_dir"),
        ("checkCRCOnRecover", "check_crc_on_recover"),
        ("brokerIP1", "broker_ip1"),
        ("HAListenPort", "ha_listen_port"),
        ("maxTransferBytesOnMessageInMemory", "max_transfer_bytes_on_message_in_memory"),
        ("diskMaxUsedSpaceRatio", "disk_max_used_space_ratio"),
        ("getHTTPResponse", "get_http_response"),
        ("URL", "url"),
        ("already_snake", "already_snake"),
        ("x", "x"),
    ],
)
def test_camel_to_snake(camel: str, snake: str) -> None:
    assert camel_to_snake(camel) == snake


def test_every_store_field_has_a_camel_case_name_that_maps_back() -> None:
    for f in dataclasses.fields(StoreConfig):
        head, *rest = f.name.split("_")
        camel = head + "".join(part.capitalize() for part in rest)
        assert camel_to_snake(camel) == f.name


def test_from_file_reads_a_rocketmq_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF.format(root=tmp_path / "store"))
    cfg = StoreConfig.from_file(conf)
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.store_path_root_dir == tmp_path / "store"
    assert cfg.root == tmp_path / "store"
    assert cfg.mapped_file_size_commit_log == 1 << 20
    assert cfg.mapped_file_size_consume_queue == 6000
    assert cfg.store_host == "192.168.1.10:10921"
    assert cfg.store_host_tuple == ("192.168.1.10", 10921)
    assert cfg.check_crc_on_recover is False
    assert cfg.delay_levels_ms == (500, 1000, 120_000, 3_600_000, 86_400_000)
    assert cfg.file_reserved_time == 48
    assert cfg.delete_hours == frozenset({4, 16})
    assert cfg.max_message_size == 65536
    assert cfg.message_index_enable is True
    assert cfg.max_transfer_count_on_message_in_memory == 64
    # Keys that configure other roles are not StoreConfig's business.
    assert not hasattr(cfg, "broker_name")


def test_defaults_match_rocketmq() -> None:
    cfg = StoreConfig.from_properties({})
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert cfg.mapped_file_size_commit_log == 1 << 30
    assert cfg.mapped_file_size_consume_queue == 300_000 * 20
    assert cfg.file_reserved_time == 72
    assert cfg.delete_hours == frozenset({4})
    assert cfg.check_crc_on_recover is True
    assert cfg.store_host_tuple == ("127.0.0.1", 10911)
    assert len(cfg.delay_levels_ms) == 18
    assert cfg.delay_levels_ms[:3] == (1000, 5000, 10_000)
    assert cfg.delay_levels_ms[-1] == 2 * 3_600_000


def test_overrides_win_over_the_file() -> None:
    cfg = StoreConfig.from_properties(
        {"flushDiskType": "SYNC_FLUSH", "maxMessageSize": "1024"}, max_message_size=2048
    )
    assert cfg.max_message_size == 2048
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH


def test_value_spelling_is_lenient_where_java_is() -> None:
    cfg = StoreConfig.from_properties(
        {"flushDiskType": "sync_flush", "checkCRCOnRecover": " TRUE ", "maxMessageSize": " 10 "}
    )
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.check_crc_on_recover is True
    assert cfg.max_message_size == 10


def test_store_host_from_ip_or_port_alone() -> None:
    assert StoreConfig.from_properties({"listenPort": "10999"}).store_host == "127.0.0.1:10999"
    assert StoreConfig.from_properties({"brokerIP1": "10.0.0.9"}).store_host == "10.0.0.9:10911"
    ipv6 = StoreConfig.from_properties({"brokerIP1": "[fe80::1]", "listenPort": "1"})
    assert ipv6.store_host_tuple == ("fe80::1", 1)
    explicit = StoreConfig.from_properties({"storeHost": "1.2.3.4:5", "brokerIP1": "10.0.0.9"})
    assert explicit.store_host == "1.2.3.4:5"


def test_store_path_expands_the_home_directory() -> None:
    cfg = StoreConfig.from_properties({"storePathRootDir": "~/mq-store"})
    assert cfg.store_path_root_dir == Path.home() / "mq-store"


@pytest.mark.parametrize(
    ("props", "field"),
    [
        ({"mappedFileSizeCommitLog": "abc"}, "mapped_file_size_commit_log"),
        ({"mappedFileSizeCommitLog": "1.5"}, "mapped_file_size_commit_log"),
        ({"flushDiskType": "FAST_FLUSH"}, "flush_disk_type"),
        ({"checkCRCOnRecover": "maybe"}, "check_crc_on_recover"),
        ({"messageDelayLevel": "1s 5x"}, "message_delay_level"),
        ({"messageDelayLevel": "1.5s"}, "message_delay_level"),
        ({"messageDelayLevel": "-1s"}, "message_delay_level"),
        ({"messageDelayLevel": "s"}, "message_delay_level"),
        ({"messageDelayLevel": "   "}, "message_delay_level"),
        ({"mappedFileSizeCommitLog": "-1"}, "mapped_file_size_commit_log"),
        ({"mappedFileSizeCommitLog": "1000"}, "mapped_file_size_commit_log"),
        ({"mappedFileSizeConsumeQueue": "-20"}, "mapped_file_size_consume_queue"),
        ({"mappedFileSizeConsumeQueue": "1001"}, "mapped_file_size_consume_queue"),
        ({"maxMessageSize": "0"}, "max_message_size"),
        ({"maxHashSlotNum": "-5"}, "max_hash_slot_num"),
        ({"maxIndexNum": "0"}, "max_index_num"),
        ({"flushIntervalCommitLog": "0"}, "flush_interval_commit_log"),
        ({"diskMaxUsedSpaceRatio": "150"}, "disk_max_used_space_ratio"),
        ({"deleteWhen": "25"}, "delete_when"),
        ({"deleteWhen": "four"}, "delete_when"),
        ({"deleteWhen": ";"}, "delete_when"),
        ({"listenPort": "abc"}, "store_host"),
        ({"storeHost": "no-port"}, "store_host"),
    ],
)
def test_bad_values_raise_config_error_naming_the_field(props: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        StoreConfig.from_properties(props)


def test_bad_values_in_a_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskType=SOMETIMES\n")
    with pytest.raises(ConfigError, match="flush_disk_type"):
        StoreConfig.from_file(conf)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        StoreConfig.from_file(tmp_path / "absent.conf")


def test_constructor_validates_too() -> None:
    with pytest.raises(ConfigError, match="max_transfer_count_on_message_in_memory"):
        StoreConfig(max_transfer_count_on_message_in_memory=0)
    cfg = StoreConfig()
    with pytest.raises(ConfigError, match="message_delay_level"):
        cfg.replace(message_delay_level="1q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_message_size = 1  # type: ignore[misc]


def test_parse_delay_levels_units() -> None:
    assert parse_delay_levels("1ms 2s 3m 4h 5d") == (1, 2000, 180_000, 14_400_000, 432_000_000)
    assert parse_delay_levels("  10s\t20s  ") == (10_000, 20_000)


def test_read_properties_handles_java_syntax(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# comment\n! also a comment\nbrokerName: broker-b\n"
        "namesrvAddr = 127.0.0.1:9876;127.0.0.2:9876\n"
        "messageDelayLevel = 1s \\\n    5s\n"
    )
    props = read_properties(conf)
    assert props["brokerName"] == "broker-b"
    assert props["namesrvAddr"] == "127.0.0.1:9876;127.0.0.2:9876"
    assert StoreConfig.from_properties(props).delay_levels_ms == (1000, 5000)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"store_path_root_dir": Path("")}, "store_path_root_dir"),
        ({"file_reserved_time": -1}, "file_reserved_time"),
    ],
)
def test_unusable_paths_and_retention_are_refused(changes: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        StoreConfig(**changes)  # type: ignore[arg-type]


def test_broker_role_and_ha_settings_are_read_from_broker_conf() -> None:
    cfg = BrokerConfig.from_properties(
        {
            "brokerRole": "SYNC_MASTER",
            "haListenPort": "20912",
            "haTransferBatchSize": "65536",
            "haMasterAddress": "10.0.0.1:10912",
            "slaveReadEnable": "true",
        }
    )
    assert cfg.store.broker_role is BrokerRole.SYNC_MASTER
    assert cfg.store.broker_role.is_master
    assert cfg.ha_listen_port == 20912
    assert cfg.store.ha_transfer_batch_size == 65536
    assert cfg.store.ha_master_address == "10.0.0.1:10912"
    assert cfg.slave_read_enable


def test_ha_port_defaults_to_the_listen_port_plus_one() -> None:
    assert BrokerConfig(listen_port=10911).ha_listen_port == 10912
    assert BrokerConfig(listen_port=0).ha_listen_port == 0


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"brokerRole": "SLAVE"}, "a slave's brokerId must be 1 or more"),
        ({"brokerRole": "ASYNC_MASTER", "brokerId": "1"}, "a master's brokerId is 0"),
        ({"brokerRole": "LEADER"}, "broker_role"),
        ({"haListenPort": "70000"}, "ha_listen_port"),
        ({"listenPort": "-1"}, "listen_port must be 0..65535, got -1"),
        ({"listenPort": "99999"}, "listen_port must be 0..65535, got 99999"),
        ({"flushConsumerOffsetInterval": "0"}, "flush_consumer_offset_interval must be positive"),
        ({"flushDelayOffsetInterval": "-1"}, "flush_delay_offset_interval must be positive"),
    ],
)
def test_inconsistent_roles_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_the_register_period_is_kept_within_rocketmqs_bounds() -> None:
    periods = [
        BrokerConfig.from_properties({"registerNameServerPeriod": str(ms)}).register_period_ms
        for ms in (0, 1000, 30_000, 600_000)
    ]
    assert periods == [10_000, 10_000, 30_000, 60_000]
