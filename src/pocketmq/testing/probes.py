"""Blocking one-shot requests to a running server, for pocketmq.testing: a remoting request
(NameServer or broker) and the HTTP/2 handshake of the gRPC endpoint.

Plain blocking sockets with a timeout, no event loop: they work from a user's sync test, from
inside a running loop (for a few milliseconds on 127.0.0.1) and from a worker thread alike.
The gRPC endpoint is checked without grpcio or protobuf: importing pocketmq's generated
``apache.rocketmq.v2`` code would clash with the official 5.x client's in a user's process.
"""

from __future__ import annotations

import socket
from typing import Any

from pocketmq.protocol.acl_sign import SessionCredentials, sign_request
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import RemotingCommand

# RFC 9113 §3.4: the client preface, then a SETTINGS frame (here empty: 9-byte frame header,
# length 0, type 0x4, no flags, stream 0). The server must answer with a SETTINGS frame first.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes((0, 0, 0, 4, 0, 0, 0, 0, 0))
_H2_FRAME_HEADER_BYTES = 9
_H2_SETTINGS = 4


def _address(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def remoting_call(
    addr: str,
    code: int,
    fields: dict[str, Any] | None = None,
    *,
    body: bytes = b"",
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> RemotingCommand:
    """Send one remoting request to ``addr`` (``host:port``) and return the response; signed
    with ``credentials`` (ACL) when given, as the admin library signs.

    Raises:
        OSError: the connection failed, timed out or closed before the response came.
        RemoteProtocolError: the peer sent a malformed frame.
    """
    conn = RemotingConnection()
    request = RemotingCommand.request(code, fields, body)
    if credentials is not None:
        sign_request(request, credentials)
    with socket.create_connection(_address(addr), timeout=timeout_s) as sock:
        sock.sendall(conn.send(request))
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError(f"{addr} closed the connection without answering")
            conn.receive_data(data)
            cmd = conn.next_command()
            if cmd is not NEED_DATA:
                assert isinstance(cmd, RemotingCommand)
                return cmd


def http2_answers(addr: str, *, timeout_s: float = 5.0) -> bool:
    """Whether ``addr`` answers an HTTP/2 connection preface with its SETTINGS frame, as a
    started gRPC server does.

    Raises:
        OSError: the connection failed or timed out.
    """
    with socket.create_connection(_address(addr), timeout=timeout_s) as sock:
        sock.sendall(_H2_PREFACE)
        header = b""
        while len(header) < _H2_FRAME_HEADER_BYTES:
            data = sock.recv(_H2_FRAME_HEADER_BYTES - len(header))
            if not data:
                return False
            header += data
        return header[3] == _H2_SETTINGS
