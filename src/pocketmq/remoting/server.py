"""RemotingServer: accepts connections and routes requests by code (NettyRemotingServer).

Connections idle for longer than ``idle_timeout_s`` (RocketMQ: 120 s) are closed; clients
heartbeat far more often than that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, KeysView

from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting.channel import (
    HandlerResult,
    RemotingChannel,
    RequestHandler,
    RunHandler,
    UnsupportedCodes,
)

log = logging.getLogger(__name__)


class Dispatcher:
    """Routes a request to the handler registered for its code. What it returns for a one-way
    request (the refusal of an unknown code included) is never written back: the channel
    drops it (see RemotingChannel). Each unknown code is logged once per dispatcher, so once
    per server."""

    def __init__(self) -> None:
        self.handlers: dict[int, RequestHandler] = {}
        self.unsupported = UnsupportedCodes()
        # Codes whose consecutive requests in a read are handled as one run (TakesRuns).
        self.run_handlers: dict[int, RunHandler] = {}

    def register(self, code: int, handler: RequestHandler, run: RunHandler | None = None) -> None:
        """``handler`` for requests of ``code``; ``run``, when given, for a run of them read
        together (it answers each as ``handler`` would)."""
        self.handlers[int(code)] = handler
        if run is not None:
            self.run_handlers[int(code)] = run
        else:
            self.run_handlers.pop(int(code), None)

    @property
    def run_codes(self) -> KeysView[int]:
        return self.run_handlers.keys()

    def __call__(self, channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return self.unsupported.refuse(channel, cmd, f" request type {cmd.code} not supported")
        return handler(channel, cmd)

    def handle_run(
        self, channel: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]:
        """A run of requests of one of ``run_codes``."""
        return self.run_handlers[cmds[0].code](channel, cmds)


class RemotingServer:
    def __init__(
        self,
        handler: RequestHandler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        idle_timeout_s: float = 120.0,
    ) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.idle_timeout_s = idle_timeout_s
        self.channels: set[RemotingChannel] = set()
        # Told about every connection that closes (the broker drops its consumers).
        self.on_channel_closed: Callable[[RemotingChannel], None] | None = None
        self._server: asyncio.Server | None = None
        self._reaper: asyncio.Task[None] | None = None

    def _new_channel(self) -> RemotingChannel:
        channel = RemotingChannel(self.handler, on_close=self._closed)
        self.channels.add(channel)
        return channel

    def _closed(self, channel: RemotingChannel) -> None:
        self.channels.discard(channel)
        if self.on_channel_closed is not None:
            self.on_channel_closed(channel)

    async def start(self, sock: socket.socket | None = None) -> int:
        """Listen (on sock when given, already bound); returns the bound port."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(self._new_channel, sock=sock)
        else:
            self._server = await loop.create_server(self._new_channel, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self._reaper = asyncio.create_task(self._reap_idle())
        return self.port

    async def _reap_idle(self) -> None:
        interval = min(10.0, self.idle_timeout_s / 2)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - self.idle_timeout_s
            for channel in list(self.channels):
                if channel.last_active < deadline:
                    log.info("closing idle connection from %s", channel.peer)
                    channel.close()

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        if self._server is not None:
            self._server.close()
        await asyncio.gather(*(c.aclose() for c in list(self.channels)), return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
