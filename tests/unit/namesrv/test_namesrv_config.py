"""GET/UPDATE_NAMESRV_CONFIG's rules: the settings under RocketMQ's names, what a running
NameServer may change, and the refusals (RocketMQ's black list, unknown keys, bad values)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.errors import ConfigError, RequestError
from pocketmq.namesrv.config import (
    NamesrvConfig,
    apply_update,
    parse_update,
    persisted_update,
    to_properties_text,
)
from pocketmq.protocol.codes import ResponseCode

CONFIG = NamesrvConfig(kv_config_path=Path("/kv.json"), config_store_path=Path("/ns.properties"))


def test_properties_text_names_every_setting_as_rocketmq_does() -> None:
    assert to_properties_text(CONFIG) == (
        "brokerChannelExpiredTime=120000\n"
        "configStorePath=/ns.properties\n"
        "kvConfigPath=/kv.json\n"
        "listenHost=127.0.0.1\n"
        "listenPort=9876\n"
        "scanNotActiveBrokerInterval=5000\n"
    )


def test_an_update_changes_what_a_running_namesrv_can_change() -> None:
    props = parse_update(b"# a comment\nscanNotActiveBrokerInterval = 7000\n")
    updated, changed = apply_update(CONFIG, props)
    assert changed == {"scan_not_active_broker_interval": 7000}
    assert updated.scan_not_active_broker_interval == 7000
    assert updated.broker_channel_expired_time == CONFIG.broker_channel_expired_time
    assert apply_update(CONFIG, {}) == (CONFIG, {})


@pytest.mark.parametrize(
    ("body", "code", "remark"),
    [
        (b"kvConfigPath=/x\n", ResponseCode.NO_PERMISSION, "Can not update config in black list."),
        (b"configBlackList=\n", ResponseCode.NO_PERMISSION, "black list"),
        (b"rocketmqHome=/x\n", ResponseCode.NO_PERMISSION, "black list"),
        (b"listenPort=1\n", ResponseCode.INVALID_PARAMETER, "listenPort is read only at start"),
        (b"orderMessageEnable=true\n", ResponseCode.INVALID_PARAMETER,
         "unknown NameServer setting 'orderMessageEnable'"),
        (b"scanNotActiveBrokerInterval=soon\n", ResponseCode.INVALID_PARAMETER, "'soon'"),
        (b"brokerChannelExpiredTime=-5\n", ResponseCode.INVALID_PARAMETER, "above 0"),
        # One bad key refuses the whole update: nothing is half applied.
        (b"scanNotActiveBrokerInterval=7000\nnope=1\n", ResponseCode.INVALID_PARAMETER, "nope"),
    ],
)  # fmt: skip
def test_refused_updates_say_what_to_change(body: bytes, code: int, remark: str) -> None:
    with pytest.raises(RequestError) as info:
        apply_update(CONFIG, parse_update(body))
    assert info.value.code == code
    assert remark in info.value.remark
    if code == ResponseCode.INVALID_PARAMETER and "unknown" in remark:
        assert "brokerChannelExpiredTime, scanNotActiveBrokerInterval" in info.value.remark


def test_a_persisted_file_restores_only_the_changeable_settings() -> None:
    saved = to_properties_text(
        NamesrvConfig(listen_port=1, scan_not_active_broker_interval=9000)
    ).encode()
    assert persisted_update(saved) == {"scanNotActiveBrokerInterval": "9000",
                                       "brokerChannelExpiredTime": "120000"}  # fmt: skip
    updated, _ = apply_update(CONFIG, persisted_update(saved))
    assert (updated.listen_port, updated.scan_not_active_broker_interval) == (9876, 9000)


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        # 0 made the broker-expiry scan a busy loop: 98 % of a core with no broker at all.
        ("scanNotActiveBrokerInterval=0", "scanNotActiveBrokerInterval=0: expected a whole"),
        ("brokerChannelExpiredTime=-1", "brokerChannelExpiredTime=-1: expected a whole"),
        ("listenPort=-1", "listen_port must be 0..65535, got -1"),
        ("listenPort=65536", "listen_port must be 0..65535, got 65536"),
    ],
)
def test_a_config_file_with_an_unusable_value_is_refused(
    tmp_path: Path, line: str, complaint: str
) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=complaint):
        NamesrvConfig.from_file(conf)
