"""The pure parts behind the broker's admin answers: the broker config update plan and its
file merge (UPDATE_BROKER_CONFIG 25 / GET_BROKER_CONFIG 26), the connections the consumer and
producer tables list (RocketMQ's Connection), SubscriptionData as fastjson writes it, and the
offset table's clone (cloneOffset) and whichGroupByTopic."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_transport import connected_channel
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.config_update import (
    RUNTIME_KEYS,
    config_properties,
    format_properties,
    merge_properties_text,
    persist,
    plan_update,
)
from pocketmq.broker.connections import Connection
from pocketmq.broker.consumers import ConsumerManager
from pocketmq.broker.filtering import compile_subscription
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.transaction.producers import ProducerRegistry
from pocketmq.clock import FakeClock
from pocketmq.conf import parse_properties
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.names import SubscriptionData
from pocketmq.protocol.properties import tags_code


def test_config_properties_use_rocketmq_names_and_round_trip() -> None:
    config = BrokerConfig(broker_name="b1", broker_ip1="10.0.0.1")
    props = config_properties(config)
    # RocketMQ's BrokerConfig / MessageStoreConfig names, acronyms included.
    assert props["brokerName"] == "b1" and props["brokerIP1"] == "10.0.0.1"
    assert props["checkCRCOnRecover"] == "true" and props["flushDiskType"] == "ASYNC_FLUSH"
    assert props["brokerRole"] == "ASYNC_MASTER" and "haListenPort" not in props  # null
    assert "brokerConfigPath" not in props
    # The text parses back (MixAll.string2Properties) into a config equal to the first.
    again = BrokerConfig.from_properties(parse_properties(format_properties(props).encode()))
    assert config_properties(again) == props


def test_an_update_splits_runtime_and_restart_keys() -> None:
    config = BrokerConfig()
    change = plan_update(
        config, {"brokerPermission": "4", "traceOn": "false", "maxMessageSize": "1024"}
    )
    assert change.config.broker_permission == 4 and change.config.trace_on is False
    # Restart-only keys are persisted but do not change the config in effect.
    assert change.config.store.max_message_size == config.store.max_message_size
    assert change.after_restart == ["maxMessageSize"]
    assert {"brokerPermission", "traceOn"} <= RUNTIME_KEYS


@pytest.mark.parametrize(
    ("update", "code", "words"),
    [
        ({"noSuchSetting": "1"}, ResponseCode.INVALID_PARAMETER, "unknown broker setting"),
        ({"traceOn": "maybe"}, ResponseCode.INVALID_PARAMETER, "true or false"),
        ({"brokerPermission": "9"}, ResponseCode.INVALID_PARAMETER, "0..7"),
        ({"maxMessageSize": "-1"}, ResponseCode.INVALID_PARAMETER, "positive"),
        ({"brokerConfigPath": "/x"}, ResponseCode.NO_PERMISSION, "black list"),
    ],
)
def test_a_bad_update_is_refused_whole(update: dict[str, str], code: int, words: str) -> None:
    with pytest.raises(RequestError) as err:
        plan_update(BrokerConfig(), {"traceOn": "false", **update})
    assert err.value.code == code and words in err.value.remark


def test_the_file_merge_replaces_keys_and_keeps_the_rest(tmp_path: Path) -> None:
    text = "# cluster\nbrokerName = b1\ntraceOn=true\nbrokerName=b2\nlistenPort: 10911\n"
    merged = merge_properties_text(text, {"brokerName": "b3", "regionId": "R"})
    assert merged == "# cluster\ntraceOn=true\nbrokerName=b3\nlistenPort: 10911\nregionId=R\n"
    path = tmp_path / "broker.conf"
    path.write_text(text)
    persist(path, {"traceOn": "false"})
    assert parse_properties(path.read_bytes())["traceOn"] == "false"
    assert not path.with_name("broker.conf.tmp").exists()


def test_subscription_data_json_is_fastjsons() -> None:
    body = SubscriptionData("T", "b || a", "TAG", 7).to_json()
    assert body == {
        "classFilterMode": False, "topic": "T", "subString": "b || a", "tagsSet": ["a", "b"],
        "codeSet": [tags_code("a"), tags_code("b")], "subVersion": 7, "expressionType": "TAG",
    }  # fmt: skip
    assert SubscriptionData("T", "a > 1", "SQL92").to_json()["tagsSet"] == []


async def test_the_tables_list_connections_with_language_and_version() -> None:
    consumers = ConsumerManager(120_000, clock=FakeClock())
    channel, _ = connected_channel()
    channel.attributes.update(language="CPP", version=401)
    sub = compile_subscription(SubscriptionData("T", "*"))
    consumers.register(channel, "c1", {"groupName": "G"}, [sub])
    assert consumers.connections("G") == [Connection("c1", channel.peer, "CPP", 401)]
    assert consumers.groups_of_topic("T") == {"G"} and consumers.groups_of_topic("U") == set()

    producers = ProducerRegistry(120_000, clock=FakeClock())
    assert producers.connections("P") is None
    conn = Connection("p1", "1.2.3.4:5", "JAVA", 499)
    producers.register("P", "p1", object(), conn)  # type: ignore[arg-type]
    assert producers.connections("P") == [conn]
    assert conn.to_json() == {
        "clientAddr": "1.2.3.4:5", "clientId": "p1", "language": "JAVA", "version": 499
    }  # fmt: skip


def test_offsets_clone_and_which_group_by_topic(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "o.json")
    offsets.commit("A", "T", 0, 5)
    offsets.commit("A", "T", 1, 7)
    offsets.commit("B", "T", 0, 1)
    offsets.commit("B", "T", 3, 9)
    assert offsets.groups_of_topic("T") == {"A", "B"}
    assert offsets.clone("A", "B", "T")
    # The destination's queues are replaced as a whole, as cloneOffset puts a copy.
    assert offsets.table["T@B"] == {0: 5, 1: 7}
    assert not offsets.clone("Nobody", "B", "T")
