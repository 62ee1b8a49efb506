"""A master and its slave (same brokerName, brokerRole=SLAVE, brokerId=1) as real processes
with a NameServer, driven by our client and raw requests:

- the slave refuses writes with RocketMQ's codes, copies its master's topics, groups, consumer
  and delay offsets within one sync round, and is listed in the topic's route beside it;
- with the master SIGKILLed, a push consumer reads from the slave what its store holds (a
  copy of the master's store here; replication is ``store/ha``'s) and commits its offsets
  there; after the master returns it continues from its offsets and loses nothing;
- the same with real replication (ASYNC_MASTER, the slave's store copied over the HA port): a
  push consumer and a LitePullConsumer consume part of what was sent and commit, go on from
  the slave while the master is SIGKILLed and commit there, and once the master is back go on
  from the committed offsets: every sent message consumed at least once (duplicates printed).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest
from broker_pair import Pair, request, runtime_info, table
from client_helpers import FAST_FROM_FIRST, Collector

from pocketmq.client import (
    ConsumeContext,
    ConsumeResult,
    LitePullConsumer,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
    message,
)
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


class HeldCollector(Collector):
    """Consumes the first ``first`` messages, then holds every further listener call until
    ``release`` (the consumer's offsets stay behind what it pulled)."""

    def __init__(self, first: int) -> None:
        super().__init__()
        self.first = first
        self.released = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        if len(self.got) >= self.first:
            await self.released.wait()
        return await super().__call__(msgs, ctx)


async def replicated_pair(
    pair: Pair, admin: ClientInstance, bodies: list[bytes]
) -> tuple[str, str]:
    """The slave of ``pair`` started and following; ``bodies`` sent to the master (ASYNC_MASTER)
    and copied to the slave over the HA port, with the topic's config. Returns the master's
    and the slave's addresses."""
    await prepare_master(admin, pair)
    pair.start("slave")
    master, slave = pair.addr("master"), pair.addr("slave")
    await wait_until(lambda: _route_is(admin, {0: master, 1: slave}), 20, "both routed")
    await send_all(pair, bodies)

    async def caught_up() -> bool:
        ours, theirs = await runtime_info(admin, slave), await runtime_info(admin, master)
        topics = await table(admin, slave, RequestCode.GET_ALL_TOPIC_CONFIG)
        return (
            ours is not None and theirs is not None
            and ours["commitLogMaxOffset"] == theirs["commitLogMaxOffset"]
            and TOPIC in topics["topicConfigTable"]
        )  # fmt: skip

    await wait_until(caught_up, 20, "the slave to replicate the master's log and topic")
    return master, slave


async def send_all(pair: Pair, bodies: list[bytes]) -> None:
    async with Producer("HaProducer", pair.namesrv.addr) as producer:
        for body in bodies:
            assert (await producer.send(message(TOPIC, body))).status is SendStatus.SEND_OK


async def committed(admin: ClientInstance, addr: str, group: str) -> int:
    """The sum of the group's committed offsets of TOPIC on the broker at ``addr``."""
    offsets = await table(admin, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    return sum(offsets["offsetTable"].get(f"{TOPIC}@{group}", {}).values())


async def kill_master(pair: Pair, admin: ClientInstance) -> None:
    pair.procs["master"].proc.kill()
    pair.procs["master"].proc.wait()
    want = {1: pair.addr("slave")}
    await wait_until(lambda: _route_is(admin, want), 20, "the master out of the route")


async def restart_master(pair: Pair, admin: ClientInstance) -> None:
    pair.start("master")
    want = {0: pair.addr("master"), 1: pair.addr("slave")}
    await wait_until(lambda: _route_is(admin, want), 20, "the master back in the route")


# One message pulled per queue at a time, and none while one waits: at the kill most of what
# was sent is still on the brokers, so that the consumer must read it from the slave.
NO_PULL_AHEAD = {**FAST_FROM_FIRST, "pull_batch_size": 1, "pull_threshold_for_queue": 1}


def fast_instance(pair: Pair, name: str) -> ClientInstance:
    return ClientInstance(pair.namesrv.addr, name, poll_name_server_interval_s=0.5,
                          heartbeat_interval_s=1.0)  # fmt: skip


async def test_a_push_consumer_goes_on_from_a_replicating_slave_and_back(pair: Pair) -> None:
    admin = ClientInstance(pair.namesrv.addr, "admin@ha")
    instance = fast_instance(pair, "push@ha")
    sent = [f"m-{i}".encode() for i in range(40)]
    later = [f"later-{i}".encode() for i in range(12)]
    try:
        master, slave = await replicated_pair(pair, admin, sent)
        collector = HeldCollector(first=15)
        consumer = PushConsumer(GROUP, pair.namesrv.addr, listener=collector, instance=instance,
                                **NO_PULL_AHEAD)  # fmt: skip
        consumer.subscribe(TOPIC)
        async with consumer:
            await collector.wait_for(15)
            await wait_until(lambda: _positive(committed(admin, master, GROUP)), 20,
                             "part of it committed on the master")  # fmt: skip
            before_kill = await committed(admin, master, GROUP)
            await kill_master(pair, admin)
            # The listener holds, so the queues are full and nothing was pulled since the kill.
            from_slave = len(sent) - _pulled(consumer)
            assert from_slave > 0
            collector.released.set()
            await collector.wait_for(len(sent), timeout_s=30)
            assert set(collector.bodies()) == set(sent)
            await wait_until(lambda: _is(committed(admin, slave, GROUP), len(sent)), 20,
                             "every offset committed on the slave")  # fmt: skip

            await restart_master(pair, admin)
            await send_all(pair, later)
            await collector.wait_for(len(sent) + len(later), timeout_s=30)
            assert set(collector.bodies()) == set(sent) | set(later)
            await wait_until(lambda: _is(committed(admin, master, GROUP), len(sent) + len(later)),
                             20, "the offsets committed on the master again")  # fmt: skip
        duplicated = len(collector.got) - len(sent) - len(later)
        print(f"\npush consumer: {before_kill} committed before the kill, {from_slave} read "
              f"from the slave, {len(collector.got)} consumed of {len(sent) + len(later)}, "
              f"{duplicated} duplicated")  # fmt: skip
    finally:
        await instance.close()
        await admin.close()


async def test_a_lite_pull_consumer_goes_on_from_a_replicating_slave_and_back(
    pair: Pair,
) -> None:
    group = "HaLiteGroup"
    admin = ClientInstance(pair.namesrv.addr, "admin@ha")
    sent = [f"m-{i}".encode() for i in range(40)]
    later = [f"later-{i}".encode() for i in range(12)]
    got: list[bytes] = []

    async def poll_until(lite: LitePullConsumer, count: int) -> None:
        async with asyncio.timeout(30):
            while len(got) < count:
                got.extend(m.body for m in await lite.poll(1))

    instances = [fast_instance(pair, "lite@ha"), fast_instance(pair, "lite2@ha")]

    def lite_consumer(instance: ClientInstance) -> LitePullConsumer:
        lite = LitePullConsumer(group, pair.namesrv.addr, auto_commit=False, instance=instance,
                                **NO_PULL_AHEAD)  # fmt: skip
        lite.subscribe(TOPIC)
        return lite

    try:
        master, slave = await replicated_pair(pair, admin, sent)
        async with lite_consumer(instances[0]) as lite:
            await poll_until(lite, 15)
            await lite.commit_sync()
            assert await committed(admin, master, group) == len(got)
            await kill_master(pair, admin)
            # Nothing polled since: its buffer is full, nothing was pulled since the kill.
            from_slave = len(sent) - _pulled(lite)
            assert from_slave > 0
            await poll_until(lite, len(sent))
            assert set(got) == set(sent)
            # Its offsets go to the master while its route names one, as the Java client's do.
            await wait_until(lambda: _routed_in(instances[0], {1}), 20, "its route updated")
            await lite.commit_sync()
            assert await committed(admin, slave, group) == len(sent)
            await restart_master(pair, admin)
            # The consumer commits where RocketMQ's does: to the master once it is routed.
            await wait_until(lambda: _routed_in(instances[0], {0, 1}), 20, "its route updated")
            await lite.commit_sync()
            assert await committed(admin, master, group) == len(sent)
        # A new consumer of the group starts from the offsets committed on the master.
        await send_all(pair, later)
        async with lite_consumer(instances[1]) as again:
            await poll_until(again, len(sent) + len(later))
        assert set(got) == set(sent) | set(later)
        duplicated = len(got) - len(sent) - len(later)
        print(f"\nlite pull consumer: {from_slave} read from the slave, {len(got)} consumed of "
              f"{len(sent) + len(later)}, {duplicated} duplicated")  # fmt: skip
        assert duplicated == 0
    finally:
        for instance in instances:
            await instance.close()
        await admin.close()


def _pulled(consumer: PushConsumer | LitePullConsumer) -> int:
    """How many messages the consumer has pulled (its queues' next pull offsets)."""
    return sum(pq.next_offset for pq in consumer.process_queues.values())


async def _positive(value: Awaitable[int]) -> bool:
    return await value > 0


async def _is(value: Awaitable[int], wanted: int) -> bool:
    return await value == wanted


def _routed_in(instance: ClientInstance, ids: set[int]) -> bool:
    """Whether the client's own route (as its NameServer poll left it) lists these brokers."""
    route = instance.routes.get(TOPIC)
    return route is not None and set(route.broker_addrs.get("broker-a", {})) == ids
