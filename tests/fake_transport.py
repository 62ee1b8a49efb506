"""A fake asyncio transport for RemotingChannel unit tests: it keeps what is written and
whether the connection was closed, and decodes the frames written so far. No sockets."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel


class FakeTransport(asyncio.Transport):
    """Keeps what one side writes to its peer and whether it closed the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.writes = 0  # calls of write(): coalescing shows in this count
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.writes += 1
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def commands(self) -> list[RemotingCommand]:
        """Every frame written so far, decoded."""
        conn = RemotingConnection()
        conn.receive_data(bytes(self.written))
        out = []
        while (cmd := conn.next_command()) is not NEED_DATA:
            assert isinstance(cmd, RemotingCommand)
            out.append(cmd)
        return out

    def codes(self) -> list[int]:
        """The codes of the frames written so far."""
        return [cmd.code for cmd in self.commands()]


def connected_channel(handler: Any = None) -> tuple[RemotingChannel, FakeTransport]:
    """A channel (serving ``handler``) connected to a fake transport; needs a running loop."""
    channel, transport = RemotingChannel(handler), FakeTransport()
    channel.connection_made(transport)
    return channel, transport
