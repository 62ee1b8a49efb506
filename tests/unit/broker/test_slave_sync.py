"""SlaveSynchronize against fake master answers: what a slave installs from
GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (our master's bodies and a Java master's fastjson text),
what it persists, and that one failing table does not stop the others."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.slave_sync import SlaveSynchronize
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from pocketmq.broker.topics import TopicConfig, TopicConfigManager
from pocketmq.clock import FakeClock
from pocketmq.jsonfile import read_json
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.store import MessageStore

MASTER = "127.0.0.1:10911"


class FakeMaster:
    """Answers each request code with a canned (code, body), or raises what it is given."""

    def __init__(self) -> None:
        self.answers: dict[int, tuple[int, bytes] | Exception] = {}
        self.asked: list[tuple[str, int]] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.asked.append((addr, cmd.code))
        answer = self.answers[cmd.code]
        if isinstance(answer, Exception):
            raise answer
        code, body = answer
        return cmd.response(code, None if code == ResponseCode.SUCCESS else "refused", body=body)


class Tables:
    """A broker's four tables in ``root``, as the sync reads and writes them."""

    def __init__(self, root: Path, store: MessageStore, clock: FakeClock) -> None:
        self.topics = TopicConfigManager(
            root / "topics.json", cluster="C", broker_name="b", auto_create=True,
            default_queue_nums=4, clock=clock,
        )  # fmt: skip
        self.topics.load()
        self.offsets = ConsumerOffsetManager(root / "consumerOffset.json")
        self.schedule = ScheduleMessageService(store, root / "delayOffset.json", clock=clock)
        self.subscription_groups = SubscriptionGroupManager(
            root / "subscriptionGroup.json", auto_create=True, clock=clock
        )


@pytest.fixture
def master(tmp_path: Path, store: MessageStore, clock: FakeClock) -> Tables:
    tables = Tables(tmp_path / "master", store, clock)
    clock.advance(5.0)
    tables.topics.update(TopicConfig("Orders", 8, 8))
    tables.subscription_groups.update(SubscriptionGroupConfig("G", retry_max_times=3))
    tables.offsets.commit("G", "Orders", 0, 42)
    tables.schedule.install({1: 7, 3: 2})
    return tables


@pytest.fixture
def slave(tmp_path: Path, store: MessageStore, clock: FakeClock) -> Tables:
    return Tables(tmp_path / "slave", store, clock)


def answers_of(master: Tables) -> dict[int, tuple[int, bytes] | Exception]:
    ok = ResponseCode.SUCCESS
    return {
        RequestCode.GET_ALL_TOPIC_CONFIG: (ok, json_body.dumps(master.topics.wrapper())),
        RequestCode.GET_ALL_CONSUMER_OFFSET: (ok, json_body.dumps(master.offsets.encode())),
        RequestCode.GET_ALL_DELAY_OFFSET: (ok, json_body.dumps(master.schedule.encode())),
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (
            ok, json_body.dumps(master.subscription_groups.wrapper())
        ),
    }  # fmt: skip


def synchronizer(slave: Tables, fake: FakeMaster) -> SlaveSynchronize:
    broker: Any = SimpleNamespace(
        namesrv_client=fake,
        topics=slave.topics,
        offsets=slave.offsets,
        schedule=slave.schedule,
        subscription_groups=slave.subscription_groups,
    )
    return SlaveSynchronize(broker)


async def test_one_round_installs_and_persists_the_masters_tables(
    master: Tables, slave: Tables
) -> None:
    fake = FakeMaster()
    fake.answers = answers_of(master)
    slave.offsets.commit("Other", "Orders", 1, 5)  # a group only the slave knows stays
    await synchronizer(slave, fake).sync_all(MASTER)
    assert [code for _, code in fake.asked] == [21, 43, 45, 201]
    assert {addr for addr, _ in fake.asked} == {MASTER}
    assert slave.topics.table == master.topics.table
    assert slave.topics.data_version == master.topics.data_version
    assert slave.subscription_groups.table == master.subscription_groups.table
    assert slave.subscription_groups.data_version == master.subscription_groups.data_version
    assert slave.offsets.query("G", "Orders", 0) == 42
    assert slave.offsets.query("Other", "Orders", 1) == 5
    assert slave.schedule.offsets == {1: 7, 3: 2}
    # Each table is on disk, in the files a restart (or a later promotion) reads.
    assert read_json(slave.topics.path)["topicConfigTable"]["Orders"]["readQueueNums"] == 8
    assert read_json(slave.offsets.path)["offsetTable"]["Orders@G"] == {"0": 42}
    assert read_json(slave.schedule.path)["offsetTable"] == {"1": 7, "3": 2}
    reloaded = SubscriptionGroupManager(slave.subscription_groups.path, auto_create=False)
    reloaded.load()
    assert reloaded.table["G"].retry_max_times == 3
    assert reloaded.data_version == master.subscription_groups.data_version


async def test_topics_and_groups_are_kept_while_the_data_version_is_the_same(
    master: Tables, slave: Tables
) -> None:
    fake = FakeMaster()
    fake.answers = answers_of(master)
    sync = synchronizer(slave, fake)
    await sync.sync_all(MASTER)
    slave.topics.table["SlaveOnly"] = TopicConfig("SlaveOnly")
    await sync.sync_all(MASTER)
    assert "SlaveOnly" in slave.topics.table  # same version: nothing replaced
    master.topics.update(TopicConfig("Payments", 2, 2))
    fake.answers = answers_of(master)
    await sync.sync_all(MASTER)
    assert "SlaveOnly" not in slave.topics.table
    assert slave.topics.get("Payments") == TopicConfig("Payments", 2, 2)


async def test_a_java_masters_fastjson_bodies_install(slave: Tables) -> None:
    fake = FakeMaster()
    ok = ResponseCode.SUCCESS
    fake.answers = {
        RequestCode.GET_ALL_TOPIC_CONFIG: (ok, b'{"dataVersion":{"counter":3,"stateVersion":0,'
            b'"timestamp":1700000000000},"topicConfigTable":{"J":{"order":false,"perm":6,'
            b'"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":"J",'
            b'"topicSysFlag":0,"writeQueueNums":2}}}'),
        RequestCode.GET_ALL_CONSUMER_OFFSET: (ok, b'{"offsetTable":{"J@G":{0:11,1:12}}}'),
        RequestCode.GET_ALL_DELAY_OFFSET: (ok, b'{"offsetTable":{2:9}}'),
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (ok, b'{"dataVersion":{"counter":1,'
            b'"timestamp":1700000000001},"subscriptionGroupTable":{"G":{"brokerId":0,'
            b'"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
            b'"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,'
            b'"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'),
    }  # fmt: skip
    await synchronizer(slave, fake).sync_all(MASTER)
    assert slave.topics.get("J") == TopicConfig("J", 2, 2)
    assert slave.topics.data_version == {"timestamp": 1700000000000, "counter": 3}
    assert slave.offsets.query("G", "J", 1) == 12
    assert slave.schedule.offsets == {2: 9}
    assert slave.subscription_groups.table["G"].which_broker_when_consume_slowly == 1


async def test_a_failing_table_is_skipped_and_the_others_install(
    master: Tables, slave: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeMaster()
    fake.answers = answers_of(master)
    fake.answers[RequestCode.GET_ALL_TOPIC_CONFIG] = ConnectionError("refused")
    fake.answers[RequestCode.GET_ALL_CONSUMER_OFFSET] = (ResponseCode.SYSTEM_ERROR, b"")
    fake.answers[RequestCode.GET_ALL_DELAY_OFFSET] = (ResponseCode.SUCCESS, b'{"offsetTable":[]}')
    before = dict(slave.topics.table)
    await synchronizer(slave, fake).sync_all(MASTER)
    assert slave.topics.table == before
    assert slave.offsets.table == {}
    assert slave.schedule.offsets == {}
    assert slave.subscription_groups.table == master.subscription_groups.table
    logged = caplog.text
    assert "syncing topic configs" in logged
    assert "syncing consumer offsets" in logged
    assert "syncing delay offsets" in logged
