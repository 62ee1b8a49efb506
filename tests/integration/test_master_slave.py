"""A master and its slave (same brokerName, brokerRole=SLAVE, brokerId=1) as real processes
with a NameServer, driven by our client and raw requests:

- the slave refuses writes with RocketMQ's codes, copies its master's topics, groups, consumer
  and delay offsets within one sync round, and is listed in the topic's route beside it;
- with the master SIGKILLed, a push consumer reads from the slave what its store holds (a
  copy of the master's store here; replication is ``store/ha``'s) and commits its offsets
  there; after the master returns it continues from its offsets and loses nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_pair import Pair, request, table
from client_helpers import FAST_FROM_FIRST, Collector

from pocketmq.client import Producer, PushConsumer, SendStatus, message
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "HaTopic"
GROUP = "HaGroup"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    p = Pair(tmp_path)
    try:
        yield p
    finally:
        p.stop()


async def brokers_in_route(client: ClientInstance) -> dict[int, str]:
    route = await client.fetch_route(TOPIC)
    return {} if route is None else route.broker_addrs.get("broker-a", {})


async def prepare_master(client: ClientInstance, pair: Pair) -> None:
    """Topic (4 queues) and group (retryMaxTimes 5) on the master."""
    master = pair.addr("master")
    topic = {"topic": TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    resp = await request(client, master, RequestCode.UPDATE_AND_CREATE_TOPIC, topic)
    assert resp.code == ResponseCode.SUCCESS
    group = json_body.dumps({"groupName": GROUP, "retryMaxTimes": 5})
    resp = await request(client, master, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                         group)  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS


async def test_a_slave_refuses_writes_copies_its_masters_tables_and_is_routed(
    pair: Pair,
) -> None:
    client = ClientInstance(pair.namesrv.addr, "admin@ha")
    try:
        await prepare_master(client, pair)
        master = pair.addr("master")
        resp = await request(client, master, RequestCode.UPDATE_CONSUMER_OFFSET,
                             {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 2,
                              "commitOffset": 3})  # fmt: skip
        assert resp.code == ResponseCode.SUCCESS
        async with Producer("HaProducer", pair.namesrv.addr) as producer:
            delayed = message(TOPIC, b"later", properties={MessageConst.DELAY_TIME_LEVEL: "1"})
            assert (await producer.send(delayed)).status is SendStatus.SEND_OK

        async def delay_delivered() -> bool:
            offsets = await table(client, master, RequestCode.GET_ALL_DELAY_OFFSET)
            return bool(offsets["offsetTable"].get("1") == 1)

        await wait_until(delay_delivered, 20, "the master's delay level 1 to deliver")
        slave_proc = pair.start("slave")
        # The gRPC endpoint runs on masters only: a slave binds no port for it.
        assert slave_proc.ready["grpc"] == 0
        assert pair.procs["master"].ready["grpc"] != 0
        slave = pair.addr("slave")
        want_topics = await table(client, master, RequestCode.GET_ALL_TOPIC_CONFIG)

        async def synced() -> bool:
            topics = await table(client, slave, RequestCode.GET_ALL_TOPIC_CONFIG)
            offsets = await table(client, slave, RequestCode.GET_ALL_CONSUMER_OFFSET)
            delay = await table(client, slave, RequestCode.GET_ALL_DELAY_OFFSET)
            groups = await table(client, slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return (
                topics == want_topics
                and offsets["offsetTable"].get(f"{TOPIC}@{GROUP}") == {"2": 3}
                and delay["offsetTable"].get("1") == 1
                and groups["subscriptionGroupTable"].get(GROUP, {}).get("retryMaxTimes") == 5
            )

        # The first round runs as soon as registration names the master.
        await wait_until(synced, 10, "the slave to copy the master's tables")
        stored = json_body.loads((pair.home("slave") / "store/config/topics.json").read_bytes())
        assert stored["topicConfigTable"][TOPIC]["readQueueNums"] == 4

        sent = await request(client, slave, RequestCode.SEND_MESSAGE,
                             {"producerGroup": "P", "topic": "NewOnSlave", "queueId": 0},
                             b"x")  # fmt: skip
        assert sent.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (sent.remark or "")
        header = {"producerGroup": "P", "tranStateTableOffset": 0, "commitLogOffset": 0,
                  "commitOrRollback": 8, "msgId": "M"}  # fmt: skip
        end = await request(client, slave, RequestCode.END_TRANSACTION, header)
        assert end.code == ResponseCode.SLAVE_NOT_AVAILABLE
        topics = await table(client, slave, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert "NewOnSlave" not in topics["topicConfigTable"]
        assert await brokers_in_route(client) == {0: master, 1: slave}
    finally:
        await client.close()


async def test_a_consumer_reads_from_the_slave_while_the_master_is_down(pair: Pair) -> None:
    admin = ClientInstance(pair.namesrv.addr, "admin@ha")
    consumer_instance = ClientInstance(
        pair.namesrv.addr, "consumer@ha", poll_name_server_interval_s=0.5,
        heartbeat_interval_s=1.0,
    )  # fmt: skip
    before = {f"before-{i}".encode() for i in range(20)}
    after = {f"after-{i}".encode() for i in range(12)}
    try:
        await prepare_master(admin, pair)
        async with Producer("HaProducer", pair.namesrv.addr) as producer:
            for body in sorted(before):
                assert (await producer.send(message(TOPIC, body))).status is SendStatus.SEND_OK
        # The slave starts on a copy of the master's store (replication's part, done by hand).
        assert pair.procs["master"].stop() == 0
        shutil.copytree(pair.home("master") / "store", pair.home("slave") / "store")
        pair.start("master")
        pair.start("slave")
        master, slave = pair.addr("master"), pair.addr("slave")
        await wait_until(lambda: _route_is(admin, {0: master, 1: slave}), 20, "both routed")

        pair.procs["master"].proc.kill()
        pair.procs["master"].proc.wait()
        await wait_until(lambda: _route_is(admin, {1: slave}), 20, "the master out of the route")

        collector = Collector()
        consumer = PushConsumer(GROUP, pair.namesrv.addr, listener=collector,
                                instance=consumer_instance, **FAST_FROM_FIRST)  # fmt: skip
        consumer.subscribe(TOPIC)
        async with consumer:
            await collector.wait_for(len(before))
            assert set(collector.bodies()) == before

            async def committed_on_slave() -> bool:
                offsets = await table(admin, slave, RequestCode.GET_ALL_CONSUMER_OFFSET)
                queues = offsets["offsetTable"].get(f"{TOPIC}@{GROUP}", {})
                return sum(queues.values()) == len(before)

            await wait_until(committed_on_slave, 20, "the offsets committed on the slave")

            pair.start("master")
            await wait_until(lambda: _route_is(admin, {0: master, 1: slave}), 20, "master back")
            async with Producer("HaProducer", pair.namesrv.addr) as producer:
                for body in sorted(after):
                    result = await producer.send(message(TOPIC, body))
                    assert result.status is SendStatus.SEND_OK
            await collector.wait_for(len(before) + len(after), timeout_s=30)
            assert set(collector.bodies()) == before | after

            async def committed_on_master() -> bool:
                offsets = await table(admin, master, RequestCode.GET_ALL_CONSUMER_OFFSET)
                queues = offsets["offsetTable"].get(f"{TOPIC}@{GROUP}", {})
                return sum(queues.values()) == len(before) + len(after)

            await wait_until(committed_on_master, 20, "the offsets committed on the master")
        duplicated = len(collector.got) - len(before | after)
        print(f"consumed {len(collector.got)} messages, {duplicated} duplicated")
    finally:
        await consumer_instance.close()
        await admin.close()


async def _route_is(client: ClientInstance, want: dict[int, str]) -> bool:
    return await brokers_in_route(client) == want
