"""The asyncio remoting transport over real loopback sockets, server and client in-process."""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import uvloop

from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel, RemotingClient, RemotingServer
from waiting import wait_until

pytestmark = pytest.mark.integration

ECHO = 9001
FAIL = 9002
HOLD = 9003
CALL_BACK = 9004


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    """Run the scenario on asyncio's loop and on uvloop (which the servers use)."""
    asyncio.run(asyncio.wait_for(coro_fn(), 30))
    uvloop.run(asyncio.wait_for(coro_fn(), 30))


class Harness:
    def __init__(self, idle_timeout_s: float = 120) -> None:
        self.release = asyncio.Event()
        self.held = 0
        self.dispatcher = Dispatcher()
        self.dispatcher.register(ECHO, self.echo)
        self.dispatcher.register(FAIL, self.fail)
        self.dispatcher.register(HOLD, self.hold)
        self.dispatcher.register(CALL_BACK, self.call_back)
        self.server = RemotingServer(self.dispatcher, idle_timeout_s=idle_timeout_s)
        self.addr = ""

    def echo(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body)

    def fail(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("boom")

    async def hold(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        self.held += 1
        await self.release.wait()
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"held": cmd.ext_fields["n"]})

    async def call_back(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        # The broker asks the client something before answering (as CHECK_TRANSACTION_STATE).
        answer = await channel.invoke(
            RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 5
        )
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"client_said": answer.remark})

    async def __aenter__(self) -> Harness:
        port = await self.server.start()
        self.addr = f"127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()


@contextlib.asynccontextmanager
async def client_and_harness() -> AsyncIterator[tuple[Harness, RemotingClient]]:
    async with Harness() as h:
        client = RemotingClient()
        try:
            yield h, client
        finally:
            await client.close()


def test_request_response_and_unknown_code() -> None:
    async def main() -> None:
        async with client_and_harness() as (h, client):
            resp = await client.invoke(
                h.addr, RemotingCommand.request(ECHO, {"a": 1}, body=b"payload"), 5
            )
            assert resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields == {"a": "1"} and resp.body == b"payload"
            resp = await client.invoke(h.addr, RemotingCommand.request(4242), 5)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert "4242" in (resp.remark or "")

    run(main)


def test_handler_error_becomes_system_error_and_connection_survives() -> None:
    async def main() -> None:
        async with client_and_harness() as (h, client):
            resp = await client.invoke(h.addr, RemotingCommand.request(FAIL), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "boom" in (resp.remark or "")
            assert (await client.invoke(h.addr, RemotingCommand.request(ECHO), 5)).code == 0

    run(main)


def test_concurrent_requests_are_matched_by_opaque() -> None:
    async def main() -> None:
        async with client_and_harness() as (h, client):
            held = [
                asyncio.create_task(
                    client.invoke(h.addr, RemotingCommand.request(HOLD, {"n": i}), 5)
                )
                for i in range(10)
            ]
            await wait_until(lambda: h.held == 10, 5, "ten held requests", interval_s=0.005)
            # Answers to later requests overtake the held ones on the same connection.
            echo = await client.invoke(h.addr, RemotingCommand.request(ECHO, {"x": "y"}), 5)
            assert echo.ext_fields == {"x": "y"}
            h.release.set()
            results = await asyncio.gather(*held)
            assert [r.ext_fields["held"] for r in results] == [str(i) for i in range(10)]

    run(main)


def test_server_calls_the_client_back() -> None:
    def client_handler(channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        assert cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO
        return cmd.response(ResponseCode.SUCCESS, remark="running")

    async def main() -> None:
        async with Harness() as h:
            client = RemotingClient(client_handler)
            try:
                resp = await client.invoke(h.addr, RemotingCommand.request(CALL_BACK), 5)
                assert resp.ext_fields == {"client_said": "running"}
            finally:
                await client.close()

    run(main)


def test_timeout_and_close_fail_pending_requests() -> None:
    async def main() -> None:
        async with client_and_harness() as (h, client):
            with pytest.raises(TimeoutError):
                await client.invoke(h.addr, RemotingCommand.request(HOLD, {"n": 0}), 0.2)
            pending = asyncio.create_task(
                client.invoke(h.addr, RemotingCommand.request(HOLD, {"n": 1}), 10)
            )
            await wait_until(lambda: h.held == 2, 5, "two held requests", interval_s=0.005)
            for channel in list(h.server.channels):
                channel.close()
            with pytest.raises(ConnectionError):
                await pending
            # The client reconnects on the next call.
            assert (await client.invoke(h.addr, RemotingCommand.request(ECHO), 5)).code == 0

    run(main)


def test_oneway_requests_get_no_answer() -> None:
    async def main() -> None:
        seen: list[RemotingCommand] = []
        async with Harness() as h:
            h.dispatcher.register(ECHO + 100, lambda ch, cmd: seen.append(cmd))  # type: ignore[func-returns-value]
            client = RemotingClient()
            try:
                await client.invoke_oneway(h.addr, RemotingCommand.request(ECHO + 100, {"k": "v"}))
                await wait_until(lambda: len(seen) == 1, 5, "the oneway request", interval_s=0.005)
                assert seen[0].is_oneway and seen[0].ext_fields == {"k": "v"}
            finally:
                await client.close()

    run(main)


def test_connect_failure_is_a_connection_error() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = RemotingClient()
        with pytest.raises(ConnectionError):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1)
        await client.close()

    run(main)


def test_idle_connections_are_closed() -> None:
    async def main() -> None:
        async with Harness(idle_timeout_s=0.2) as h:
            client = RemotingClient()
            try:
                channel = await client.channel(h.addr)
                await asyncio.wait_for(channel.closed, 5)
                assert not h.server.channels
            finally:
                await client.close()

    run(main)


def _garbage(rng: random.Random) -> bytes:
    choice = rng.randrange(5)
    if choice == 0:
        return rng.randbytes(rng.randint(1, 200))
    if choice == 1:  # absurd length
        return struct.pack(">i", rng.choice([-5, 0, 3, 1 << 30]))
    if choice == 2:  # header length past the frame
        return struct.pack(">iI", 8, 1000) + b"abcd"
    if choice == 3:  # invalid JSON header
        bad = b'{"code":10,'
        return struct.pack(">iI", 4 + len(bad), len(bad)) + bad
    good = RemotingCommand.request(ECHO, body=b"x" * 100).encode()
    return good[: rng.randint(1, len(good) - 1)]  # truncated, then the connection closes


def test_hostile_frames_do_not_disturb_other_clients() -> None:
    async def main() -> None:
        async with client_and_harness() as (h, client):
            rng = random.Random(1234)
            host, port = h.addr.rsplit(":", 1)
            for _ in range(60):
                _reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(_garbage(rng))
                await writer.drain()
                writer.close()
                resp = await client.invoke(h.addr, RemotingCommand.request(ECHO, {"ok": 1}), 5)
                assert resp.code == ResponseCode.SUCCESS
            await wait_until(
                lambda: len(h.server.channels) == 1, 5, "the garbage connections closed",
                interval_s=0.005,
            )  # fmt: skip

    run(main)
