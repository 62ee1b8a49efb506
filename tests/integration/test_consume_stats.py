"""GET_CONSUME_STATS on a live `pocketmq serve`, and `pocketmq admin consumer-progress` over it.

Known numbers of messages are sent, pulled and committed through plain remoting requests, so
every offset and timestamp in the answer can be asserted exactly.
"""

from __future__ import annotations

import asyncio
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration

GROUP = "StatsGroup"
BROKER_NAME = "broker-a"


@dataclass
class Servers:
    namesrv: str
    broker: str


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        yield Servers(f"127.0.0.1:{proc.ready['namesrv']}", f"127.0.0.1:{proc.ready['broker']}")
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


async def call(client: RemotingClient, addr: str, code: int, fields: dict[str, Any],
               body: bytes = b"") -> RemotingCommand:  # fmt: skip
    resp = await client.invoke(addr, RemotingCommand.request(code, fields, body), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def wait_for_max_offset(
    client: RemotingClient, addr: str, topic: str, queue_id: int, want: int
) -> None:
    # Sends are acknowledged before the ConsumeQueue is built; pulls only see built queues.
    fields = {"topic": topic, "queueId": queue_id}

    async def reached() -> bool:
        resp = await call(client, addr, RequestCode.GET_MAX_OFFSET, fields)
        return int(resp.ext_fields["offset"]) >= want

    await wait_until(reached, 10, f"{topic}/{queue_id} to reach max offset {want}")


async def next_millisecond() -> None:
    now_ms = int(time.time() * 1000)
    await wait_until(
        lambda: int(time.time() * 1000) > now_ms, 1, "the next millisecond", interval_s=0.001
    )


async def send(client: RemotingClient, addr: str, topic: str, queue_id: int, count: int) -> None:
    for i in range(count):
        fields = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
                  "defaultTopicQueueNums": 4, "queueId": queue_id, "sysFlag": 0,
                  "bornTimestamp": int(time.time() * 1000), "flag": 0,
                  "properties": encode_properties({"UNIQ_KEY": f"{topic}-{queue_id}-{i}"}),
                  "reconsumeTimes": 0}  # fmt: skip
        await call(client, addr, RequestCode.SEND_MESSAGE, fields, f"m{i}".encode())
        # Distinct store times, so that an off-by-one in lastTimestamp cannot go unseen.
        await next_millisecond()
    await wait_for_max_offset(client, addr, topic, queue_id, count)


async def pull(
    client: RemotingClient, addr: str, topic: str, queue_id: int, max_nums: int
) -> list[int]:
    """Pull from offset 0 for GROUP; returns the store timestamps of the messages pulled."""
    resp = await call(
        client, addr, RequestCode.PULL_MESSAGE,
        {"consumerGroup": GROUP, "topic": topic, "queueId": queue_id, "queueOffset": 0,
         "maxMsgNums": max_nums, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
         "subscription": "*", "subVersion": 0},
    )  # fmt: skip
    stamps, pos = [], 0
    while pos < len(resp.body):
        size = struct.unpack_from(">i", resp.body, pos)[0]
        stamps.append(decode_message(resp.body[pos : pos + size]).store_timestamp)
        pos += size
    return stamps


async def commit(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int) -> None:
    await call(
        client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": topic, "queueId": queue_id, "commitOffset": offset},
    )  # fmt: skip


async def consume_stats(
    client: RemotingClient, addr: str, group: str = GROUP, **fields: str
) -> dict[tuple[str, str, int], dict[str, int]]:
    resp = await call(
        client, addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, **fields}
    )
    # fastjson's form: the MessageQueue object itself is the key, so strict JSON parsers fail.
    # consumeTps is the group's pull rate of the last minute (BrokerStatsManager), a float.
    assert re.match(rb'\{"consumeTps":[0-9.eE+-]+,"offsetTable":\{', resp.body)
    assert b'{{"brokerName":"broker-a","queueId":' in resp.body or resp.body.endswith(b"{}}")
    stats = json_body.loads(resp.body)
    return {json_body.parse_message_queue_key(k): v for k, v in stats["offsetTable"].items()}


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def local_time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def test_consume_stats_and_consumer_progress(servers: Servers) -> None:
    ns, broker = servers.namesrv, servers.broker

    async def setup() -> tuple[list[int], list[int], list[int]]:
        client = RemotingClient()
        try:
            for topic, queues in (("Stats", 2), ("Other", 1)):
                await call(
                    client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues,
                     "perm": 6},
                )  # fmt: skip
            await send(client, broker, "Stats", 0, 5)
            await send(client, broker, "Stats", 1, 3)
            await send(client, broker, "Other", 0, 2)
            # Stats queue 0: four pulled, three consumed; queue 1: all three; Other: one of two.
            stats_q0 = await pull(client, broker, "Stats", 0, 4)
            stats_q1 = await pull(client, broker, "Stats", 1, 32)
            other = await pull(client, broker, "Other", 0, 1)
            assert (len(set(stats_q0)), len(set(stats_q1)), len(other)) == (4, 3, 1)
            await commit(client, broker, "Stats", 0, 3)
            await commit(client, broker, "Stats", 1, 3)
            await commit(client, broker, "Other", 0, 1)
            return stats_q0, stats_q1, other
        finally:
            await client.close()

    stats_q0, stats_q1, other = asyncio.run(setup())

    async def check_broker() -> None:
        client = RemotingClient()
        try:
            stats = await consume_stats(client, broker)
            assert stats == {
                ("Other", BROKER_NAME, 0): {"brokerOffset": 2, "consumerOffset": 1,
                                            "lastTimestamp": other[0], "pullOffset": 1},
                ("Stats", BROKER_NAME, 0): {"brokerOffset": 5, "consumerOffset": 3,
                                            "lastTimestamp": stats_q0[2], "pullOffset": 4},
                ("Stats", BROKER_NAME, 1): {"brokerOffset": 3, "consumerOffset": 3,
                                            "lastTimestamp": stats_q1[2], "pullOffset": 3},
            }  # fmt: skip
            only = await consume_stats(client, broker, topic="Stats")
            assert set(only) == {("Stats", BROKER_NAME, 0), ("Stats", BROKER_NAME, 1)}
            # A group with no offsets, asked about one topic: every queue, from 0, no time.
            assert await consume_stats(client, broker, group="Nobody", topic="Other") == {
                ("Other", BROKER_NAME, 0): {"brokerOffset": 2, "consumerOffset": 0,
                                            "lastTimestamp": 0, "pullOffset": 0},
            }  # fmt: skip
            assert await consume_stats(client, broker, group="Nobody") == {}

            # While the group is online, only the topics it subscribes to count...
            heartbeat = json_body.dumps(
                {"clientID": "c1", "consumerDataSet": [
                    {"groupName": GROUP, "consumeType": 1, "messageModel": 1,
                     "consumeFromWhere": 0,
                     "subscriptionDataSet": [{"topic": "Stats", "subString": "*"}]}]}
            )  # fmt: skip
            await call(client, broker, RequestCode.HEART_BEAT, {}, heartbeat)
            assert set(await consume_stats(client, broker)) == set(only)
            assert await consume_stats(client, broker, topic="Other") == {}
            # ...unless the topics come as a list, which is taken as it is.
            listed = await consume_stats(client, broker, topicList="Other;")
            assert set(listed) == {("Other", BROKER_NAME, 0)}
            await call(client, broker, RequestCode.UNREGISTER_CLIENT, {"consumerGroup": GROUP})
            assert len(await consume_stats(client, broker)) == 3
        finally:
            await client.close()

    asyncio.run(check_broker())

    out = admin(ns, "consumer-progress", "-g", GROUP)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert lines[0] == ["topic", "broker", "queue", "broker", "offset", "consumer", "offset",
                        "lag", "last", "time"]  # fmt: skip
    assert lines[1:4] == [
        ["Other", BROKER_NAME, "0", "2", "1", "1", *local_time(other[0]).split()],
        ["Stats", BROKER_NAME, "0", "5", "3", "2", *local_time(stats_q0[2]).split()],
        ["Stats", BROKER_NAME, "1", "3", "3", "0", *local_time(stats_q1[2]).split()],
    ]
    assert lines[4:] == [["total", "lag:", "3"]]

    out = admin(ns, "consumer-progress", "-g", GROUP, "-t", "Stats")
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()[1:-1]] == ["Stats", "Stats"]
    assert out.stdout.splitlines()[-1] == "total lag: 2"

    unknown = admin(ns, "consumer-progress", "-g", "Nobody")
    assert unknown.returncode == 1 and "no consume stats for group Nobody" in unknown.stderr
