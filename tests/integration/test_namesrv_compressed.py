"""A live NameServer takes compressed REGISTER_BROKER bodies (compressedRegister=true) and
answers broken ones with an error, then goes on serving."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

pytestmark = pytest.mark.integration

V4_9_4 = 401


def field(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def register(body: bytes) -> RemotingCommand:
    cmd = RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {"brokerName": "broker-z", "brokerAddr": "10.0.0.1:10911", "clusterName": "C",
         "haServerAddr": "10.0.0.1:10912", "brokerId": 0, "compressed": True,
         "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF},
        body,
    )  # fmt: skip
    cmd.version = V4_9_4
    return cmd


def test_compressed_registration(tmp_path: Path) -> None:
    raw = field(b'{"counter":1,"stateVersion":0,"timestamp":1}') + struct.pack(">i", 1)
    raw += field(b"Zipped 3 2 6 SINGLE_TAG {}") + field(b"[]")
    whole = zlib.compress(raw, 9)

    async def main(addr: str) -> None:
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, register(whole[:-12]), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert "Failed to decode RegisterBrokerBody: truncated" in (resp.remark or "")
            resp = await client.invoke(addr, register(whole), 5)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            route_req = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Zipped"}
            )
            route = json_body.loads((await client.invoke(addr, route_req, 5)).body)
            assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"])
                    for q in route["queueDatas"]] == [("broker-z", 3, 2, 6)]  # fmt: skip
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
        finally:
            await client.close()

    namesrv = ServerProcess("namesrv", tmp_path)
    try:
        asyncio.run(main(namesrv.addr))
    finally:
        assert namesrv.stop() == 0, namesrv.log_path.read_text()
    assert "Traceback" not in namesrv.log_path.read_text()
