"""RemotingClient: one channel per remote address, opened on first use (NettyRemotingClient)."""

from __future__ import annotations

import asyncio

from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting.channel import RemotingChannel, RequestHandler


def split_addr(addr: str) -> tuple[str, int]:
    """ "host:port" -> (host, port).

    Raises:
        ValueError: addr is not host:port.
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(
        self,
        handler: RequestHandler | None = None,
        *,
        connect_timeout_s: float = 3.0,
        credentials: SessionCredentials | None = None,
    ) -> None:
        # Serves the requests brokers send back to us.
        self.handler = handler
        # ACL: every request of every channel is signed with these.
        self.credentials = credentials
        self.connect_timeout_s = connect_timeout_s
        self._channels: dict[str, RemotingChannel] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    async def channel(self, addr: str) -> RemotingChannel:
        """An open channel to addr, connecting if needed.

        Raises:
            ConnectionError: cannot connect (refused, unreachable or timed out).
        """
        channel = self._channels.get(addr)
        if channel is not None and channel.is_open:
            return channel
        if self._closed:
            raise ConnectionError(f"cannot connect to {addr}: the client is closed")
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None and channel.is_open:
                return channel
            host, port = split_addr(addr)
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    transport, protocol = await loop.create_connection(
                        lambda: RemotingChannel(self.handler), host, port
                    )
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(f"cannot connect to {addr}: {exc}") from exc
            # uvloop calls connection_made on its next iteration, after this returns.
            protocol.connection_made(transport)
            protocol.credentials = self.credentials
            self._channels[addr] = protocol
            return protocol

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to addr and wait for the response.

        Raises:
            ConnectionError, TimeoutError: see RemotingChannel.invoke.
        """
        channel = self._channels.get(addr)
        if channel is None or not channel.is_open:
            channel = await self.channel(addr)
        return await channel.invoke(cmd, timeout_s)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        (await self.channel(addr)).invoke_oneway(cmd)

    def close_channel(self, addr: str) -> None:
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(c.aclose() for c in channels), return_exceptions=True)
