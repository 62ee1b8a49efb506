"""Random and truncated frames thrown at a live NameServer and broker (`pocketmq serve`):
both stay up and keep serving a well-behaved client, and shut down cleanly afterwards."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

pytestmark = pytest.mark.integration

CODES = [10, 11, 14, 15, 34, 38, 41, 105, 103, 100, 310, 320, 99999]


def hostile(rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randbytes(rng.randint(1, 512))
    if kind == 1:
        return struct.pack(">i", rng.choice([-1, 0, 1, 3, 1 << 30, 0x7FFFFFFF]))
    if kind == 2:
        return struct.pack(">iI", 8, rng.randint(5, 1 << 24)) + b"abcd"
    if kind == 3:
        junk = rng.choice([b"{", b'{"code":"x"}', b"[]", b"null", b'{"code":10,"extFields":7}'])
        return struct.pack(">iI", 4 + len(junk), len(junk)) + junk
    # A well-formed request of a real code with missing or absurd fields and a random body.
    fields = rng.choice(
        [
            {},
            {"topic": "T" * rng.randint(0, 300)},
            {"queueId": "-5", "topic": "T"},
            {"queueOffset": "abc", "topic": "T", "queueId": "0", "consumerGroup": "g"},
        ]
    )
    cmd = RemotingCommand.request(rng.choice(CODES), fields, rng.randbytes(rng.randint(0, 64)))
    data = cmd.encode()
    return data if kind < 6 else data[: rng.randint(1, len(data) - 1)]


def test_servers_survive_hostile_frames(tmp_path: Path) -> None:
    proc = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    namesrv = f"127.0.0.1:{proc.ready['namesrv']}"
    broker = f"127.0.0.1:{proc.ready['broker']}"

    async def main() -> None:
        rng = random.Random(20261122)
        client = RemotingClient()
        try:
            for round_no in range(80):
                for addr in (namesrv, broker):
                    host, port = addr.rsplit(":", 1)
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(hostile(rng))
                    await writer.drain()
                    # Read whatever comes back until the server answers or closes.
                    try:
                        async with asyncio.timeout(0.2):
                            await reader.read(65536)
                    except TimeoutError:
                        pass
                    writer.close()
                route = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                )
                resp = await client.invoke(namesrv, route, 5)
                assert resp.code == ResponseCode.SUCCESS, f"round {round_no}: {resp.remark}"
                maxo = RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": 0}
                )
                resp = await client.invoke(broker, maxo, 5)
                assert resp.code == ResponseCode.SUCCESS, f"round {round_no}: {resp.remark}"
        finally:
            await client.close()

    try:
        asyncio.run(main())
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()[-3000:]
    log = proc.log_path.read_text()
    # Bad requests get error responses; none may end in an unexpected exception.
    assert "Traceback" not in log, log[-3000:]
