"""The NameServer as a real process: registration, routes, cluster info, KV config, expiry
of a broker whose connection closes, bad requests, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess("namesrv", tmp_path)
    try:
        yield server
    finally:
        assert server.stop() == 0, server.log_path.read_text()


def register_body(*topics: str) -> bytes:
    table = {
        t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}
        for t in topics
    }
    return json_body.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"timestamp": 1, "counter": 1},
            },
            "filterServerList": [],
        }
    )


def register(name: str, addr: str, *topics: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {"brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster",
         "haServerAddr": "", "brokerId": 0, "compressed": False},
        register_body(*topics),
    )  # fmt: skip


def test_register_route_cluster_and_unregister(namesrv: ServerProcess) -> None:
    async def main() -> None:
        broker = RemotingClient()
        client = RemotingClient()
        try:
            resp = await broker.invoke(
                namesrv.addr, register("broker-a", "127.0.0.1:10911", "T"), 5
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            route_req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            resp = await client.invoke(namesrv.addr, route_req, 5)
            assert resp.code == ResponseCode.SUCCESS
            route = json_body.loads(resp.body)
            assert route["brokerDatas"] == [
                {"cluster": "DefaultCluster", "brokerName": "broker-a",
                 "brokerAddrs": {"0": "127.0.0.1:10911"}}
            ]  # fmt: skip
            assert route["queueDatas"][0]["writeQueueNums"] == 4
            missing = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"})
            resp = await client.invoke(namesrv.addr, missing, 5)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "X" in (resp.remark or "")
            resp = await client.invoke(
                namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5
            )
            info = json_body.loads(resp.body)
            assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
            resp = await client.invoke(
                namesrv.addr,
                RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
                5,
            )
            assert json_body.loads(resp.body) == {"topicList": ["T"]}
            unregister = RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                 "clusterName": "DefaultCluster", "brokerId": 0},
            )  # fmt: skip
            assert (await broker.invoke(namesrv.addr, unregister, 5)).code == ResponseCode.SUCCESS
            resp = await client.invoke(namesrv.addr, route_req, 5)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await broker.close()
            await client.close()

    asyncio.run(main())


def test_broker_forgotten_when_its_connection_closes(namesrv: ServerProcess) -> None:
    async def main() -> None:
        client = RemotingClient()
        try:
            broker = RemotingClient()
            await broker.invoke(namesrv.addr, register("broker-b", "127.0.0.1:20911", "T2"), 5)
            await broker.close()
            req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T2"})

            async def forgotten() -> bool:
                return (await client.invoke(namesrv.addr, req, 5)).code != ResponseCode.SUCCESS

            await wait_until(forgotten, 10, "the route of T2 to go")
        finally:
            await client.close()

    asyncio.run(main())


def test_kv_config_round_trip_and_persistence(tmp_path: Path) -> None:
    kv = tmp_path / "kv.json"
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"kvConfigPath={kv}\n")

    async def put_and_get(addr: str, put: bool) -> list[RemotingCommand]:
        client = RemotingClient()
        try:
            out = []
            if put:
                out.append(
                    await client.invoke(
                        addr,
                        RemotingCommand.request(
                            RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}
                        ),
                        5,
                    )
                )
            out.append(
                await client.invoke(
                    addr,
                    RemotingCommand.request(
                        RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}
                    ),
                    5,
                )
            )
            out.append(
                await client.invoke(
                    addr,
                    RemotingCommand.request(
                        RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "nope"}
                    ),
                    5,
                )
            )
            return out
        finally:
            await client.close()  # fmt: skip

    first = ServerProcess("namesrv", tmp_path, "-c", str(conf))
    try:
        put, got, missing = asyncio.run(put_and_get(first.addr, True))
        assert put.code == ResponseCode.SUCCESS
        assert got.ext_fields == {"value": "v"}
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
    finally:
        assert first.stop() == 0
    second = ServerProcess("namesrv", tmp_path, "-c", str(conf))
    try:
        got, _ = asyncio.run(put_and_get(second.addr, False))
        assert got.ext_fields == {"value": "v"}
    finally:
        assert second.stop() == 0


def test_bad_requests_get_clear_errors(namesrv: ServerProcess) -> None:
    async def main() -> None:
        client = RemotingClient()
        try:
            resp = await client.invoke(
                namesrv.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 5
            )
            assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in (resp.remark or "")
            bad = register("b", "1.2.3.4:1")
            bad.body = b"{broken"
            resp = await client.invoke(namesrv.addr, bad, 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            resp = await client.invoke(namesrv.addr, RemotingCommand.request(99999), 5)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()

    asyncio.run(main())
