"""NameServer + broker (`pocketmq serve`) as a real process, driven with remoting requests the
way 4.x clients send them: routes, auto-created topics, sync and batch sends, pulls with tag
filters and long polling, consumer offsets across a restart, heartbeats, clean shutdown."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import FLAG_ONEWAY, RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc = self._start()

    def _start(self) -> ServerProcess:
        proc = ServerProcess(
            "serve", self.workdir, "--namesrv-port", "0", "--broker-port", "0", listen=False
        )
        self.namesrv = f"127.0.0.1:{proc.ready['namesrv']}"
        self.broker = f"127.0.0.1:{proc.ready['broker']}"
        return proc

    def restart(self) -> None:
        assert self.proc.stop() == 0, self.proc.log_path.read_text()
        self.proc = self._start()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        assert c.proc.stop() == 0, c.proc.log_path.read_text()
        assert not (tmp_path / "data" / "store" / "abort").exists()


def send_request(topic: str, queue_id: int, body: bytes, **props: str) -> RemotingCommand:
    # The fields and value types the C++ client sends (numbers among the strings).
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
         "defaultTopicQueueNums": 4, "queueId": queue_id, "sysFlag": 0,
         "bornTimestamp": 1795313314656, "flag": 0, "properties": encode_properties(props),
         "reconsumeTimes": 0, "unitMode": False, "batch": False},
        body,
    )  # fmt: skip


def pull_request(topic: str, queue_id: int, offset: int, subscription: str = "*",
                 suspend_ms: int = 0) -> RemotingCommand:  # fmt: skip
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": "CG", "topic": topic, "queueId": queue_id, "queueOffset": offset,
         "maxMsgNums": 32, "sysFlag": 6 if suspend_ms else 4, "commitOffset": 0,
         "suspendTimeoutMillis": suspend_ms, "subscription": subscription, "subVersion": 0},
    )  # fmt: skip


def records(body: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    out = []
    pos = 0
    while pos < len(body):
        size = struct.unpack_from(">i", body, pos)[0]
        msg = decode_message(body[pos : pos + size], check_crc=True)
        out.append((msg.queue_offset, msg.body, msg.properties))
        pos += size
    return out


def test_route_send_and_pull(cluster: Cluster) -> None:
    async def main() -> None:
        client = RemotingClient()
        try:
            route_tbw = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
            )
            resp = await client.invoke(cluster.namesrv, route_tbw, 5)
            assert resp.code == ResponseCode.SUCCESS
            route = json_body.loads(resp.body)
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker}

            resp = await client.invoke(
                cluster.broker, send_request("T", 1, b"hello", TAGS="TagA", KEYS="k1"), 5
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert resp.ext_fields["queueId"] == "1" and resp.ext_fields["queueOffset"] == "0"
            assert len(resp.ext_fields["msgId"]) == 32
            await client.invoke(cluster.broker, send_request("T", 1, b"other", TAGS="TagB"), 5)

            # The auto-created topic reaches the NameServer without waiting 30 s.
            route_t = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})

            async def routed() -> bool:
                resp = await client.invoke(cluster.namesrv, route_t, 5)
                return resp.code == ResponseCode.SUCCESS

            await wait_until(routed, 10, "the route of T on the NameServer")

            resp = await client.invoke(cluster.broker, pull_request("T", 1, 0), 5)
            assert resp.code == ResponseCode.SUCCESS
            assert [(o, b) for o, b, _ in records(resp.body)] == [(0, b"hello"), (1, b"other")]
            assert resp.ext_fields["nextBeginOffset"] == "2"
            assert resp.ext_fields["maxOffset"] == "2"

            resp = await client.invoke(cluster.broker, pull_request("T", 1, 0, "TagB"), 5)
            assert [b for _, b, _ in records(resp.body)] == [b"other"]

            resp = await client.invoke(cluster.broker, pull_request("T", 1, 2), 5)
            assert resp.code == ResponseCode.PULL_NOT_FOUND
            assert resp.ext_fields["nextBeginOffset"] == "2"

            resp = await client.invoke(cluster.broker, pull_request("Nope", 0, 0), 5)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST

            resp = await client.invoke(cluster.broker, send_request("bad topic!", 0, b"x"), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal" in (resp.remark or "")
            resp = await client.invoke(cluster.broker, send_request("T", 9, b"x"), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId" in (resp.remark or "")
        finally:
            await client.close()

    asyncio.run(main())


def test_long_polling_pull_returns_when_a_message_arrives(cluster: Cluster) -> None:
    async def main() -> None:
        client = RemotingClient()
        producer = RemotingClient()
        try:
            await client.invoke(cluster.broker, send_request("LP", 0, b"first"), 5)
            pull = asyncio.create_task(
                client.invoke(cluster.broker, pull_request("LP", 0, 1, suspend_ms=15_000), 20)
            )
            # Part of the behaviour under test (the pull is held, not answered): no client can
            # see that it has parked, so give it time to.
            await asyncio.sleep(0.2)
            assert not pull.done()
            await producer.invoke(cluster.broker, send_request("LP", 0, b"second"), 5)
            async with asyncio.timeout(5):
                resp = await pull
            assert resp.code == ResponseCode.SUCCESS
            assert [b for _, b, _ in records(resp.body)] == [b"second"]
        finally:
            await client.close()
            await producer.close()

    asyncio.run(main())


def test_batch_send_with_v2_header(cluster: Cluster) -> None:
    def batch_item(body: bytes, props: str) -> bytes:
        p = props.encode()
        size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(p)
        return (
            struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
        )

    async def main() -> None:
        client = RemotingClient()
        try:
            body = b"".join(
                batch_item(f"m{i}".encode(), encode_properties({"UNIQ_KEY": f"U{i}"}))
                for i in range(3)
            )
            req = RemotingCommand.request(
                RequestCode.SEND_BATCH_MESSAGE,
                {"a": "PG", "b": "B", "c": "TBW102", "d": 4, "e": 2, "f": 0, "g": 1, "h": 0,
                 "i": encode_properties({"WAIT": "true"}), "j": 0, "k": False, "m": True},
                body,
            )  # fmt: skip
            req.code = RequestCode.SEND_MESSAGE_V2
            resp = await client.invoke(cluster.broker, req, 5)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert len(resp.ext_fields["msgId"].split(",")) == 3
            resp = await client.invoke(cluster.broker, pull_request("B", 2, 0), 5)
            got = records(resp.body)
            assert [(o, b, p["UNIQ_KEY"]) for o, b, p in got] == [
                (0, b"m0", "U0"),
                (1, b"m1", "U1"),
                (2, b"m2", "U2"),
            ]
        finally:
            await client.close()

    asyncio.run(main())


def test_offsets_heartbeat_and_restart(cluster: Cluster) -> None:
    async def first() -> None:
        client = RemotingClient()
        try:
            await client.invoke(cluster.broker, send_request("O", 0, b"x"), 5)
            query = RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "CG", "topic": "O", "queueId": 0},
            )
            resp = await client.invoke(cluster.broker, query, 5)
            assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"
            update = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "CG", "topic": "O", "queueId": 0, "commitOffset": 1},
            )
            assert (await client.invoke(cluster.broker, update, 5)).code == ResponseCode.SUCCESS
            heartbeat = json_body.dumps(
                {"clientID": "c1", "consumerDataSet": [
                    {"groupName": "CG", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
                     "subscriptionDataSet": [{"topic": "O", "subString": "*"}]}]}
            ) + b"\n"  # fmt: skip
            resp = await client.invoke(
                cluster.broker, RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat), 5
            )
            assert resp.code == ResponseCode.SUCCESS
            members = RemotingCommand.request(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}
            )
            resp = await client.invoke(cluster.broker, members, 5)
            assert json_body.loads(resp.body) == {"consumerIdList": ["c1"]}
            maxo = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "O", "queueId": 0})
            assert (await client.invoke(cluster.broker, maxo, 5)).ext_fields["offset"] == "1"
        finally:
            await client.close()

    async def second() -> None:
        client = RemotingClient()
        try:
            query = RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "CG", "topic": "O", "queueId": 0},
            )
            resp = await client.invoke(cluster.broker, query, 5)
            assert resp.ext_fields["offset"] == "1"
            resp = await client.invoke(cluster.broker, pull_request("O", 0, 0), 5)
            assert [b for _, b, _ in records(resp.body)] == [b"x"]
        finally:
            await client.close()

    asyncio.run(first())
    cluster.restart()
    asyncio.run(second())


def test_oneway_requests_get_no_response_on_the_wire(cluster: Cluster) -> None:
    """One-way sends, offset commits, refusals and unknown codes write nothing back: the only
    frame on the connection is the answer to the normal request that follows them."""

    def oneway(cmd: RemotingCommand, opaque: int) -> bytes:
        cmd.opaque = opaque
        cmd.flag |= FLAG_ONEWAY
        return cmd.encode()

    async def main() -> None:
        other = RemotingClient()
        host, port = cluster.broker.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            commit = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "CG", "topic": "OW", "queueId": 0, "commitOffset": 1},
            )
            writer.write(oneway(send_request("OW", 0, b"one-way"), 1))
            writer.write(oneway(send_request("bad topic!", 0, b"x"), 2))
            writer.write(oneway(RemotingCommand.request(9999), 3))
            await writer.drain()

            async def stored() -> bool:
                req = RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": "OW", "queueId": 0}
                )
                resp = await other.invoke(cluster.broker, req, 5)
                return resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "1"

            await wait_until(stored, 10, "the one-way send to be stored")
            writer.write(oneway(commit, 4))
            query = RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "CG", "topic": "OW", "queueId": 0},
            )

            async def committed() -> bool:
                resp = await other.invoke(cluster.broker, query, 5)
                return resp.ext_fields.get("offset") == "1"

            await wait_until(committed, 10, "the one-way offset commit")

            normal = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": "OW", "queueId": 0}
            )
            normal.opaque = 5
            writer.write(normal.encode())
            await writer.drain()
            conn = RemotingConnection()
            async with asyncio.timeout(5):
                while (frame := conn.next_command()) is NEED_DATA:
                    conn.receive_data(await reader.read(65536))
            assert isinstance(frame, RemotingCommand)
            assert (frame.opaque, frame.code, frame.is_response) == (5, ResponseCode.SUCCESS, True)
            assert conn.next_command() is NEED_DATA and conn.buffered == 0
        finally:
            writer.close()
            await other.close()

    asyncio.run(main())
