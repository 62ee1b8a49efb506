"""Exception hierarchy shared by every pocketmq package.

Expected outcomes (a full disk, a missing message, a flush timeout) are returned as status
values inside result objects; exceptions are for violated contracts and broken files.
"""

from __future__ import annotations

from pathlib import Path


class PocketMQError(Exception):
    """Root of every pocketmq error."""


class ConfigError(PocketMQError):
    """A configuration value is missing, malformed or out of range; the message names it."""


class ProtocolError(PocketMQError):
    """A framing or codec violation."""


class LocalProtocolError(ProtocolError):
    """We tried to encode something the protocol cannot carry."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something illegal; the connection cannot be trusted any more."""


class StoreError(PocketMQError):
    """A storage engine failure."""


class CorruptRecordError(StoreError):
    """A record on disk does not decode; names the file, the offset and what is wrong."""

    def __init__(self, path: Path | str, offset: int, detail: str) -> None:
        super().__init__(f"{path}: corrupt record at offset {offset}: {detail}")
        self.path = str(path)
        self.offset = offset
        self.detail = detail


class StoreWriteError(StoreError):
    """A write to the store failed. Sticky: after one, every later append fails fast."""


class RequestError(PocketMQError):
    """A request cannot be served as sent; becomes a response with this code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class ClientError(PocketMQError):
    """A client call failed: no route, no broker reachable, bad arguments (MQClientException)."""


class BrokerError(ClientError):
    """A broker answered a request with an error code (MQBrokerException)."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        super().__init__(f"CODE: {code} DESC: {remark or ''} BROKER: {addr}".strip())
        self.code = code
        self.remark = remark or ""
        self.addr = addr


class RequestTimeoutError(ClientError):
    """A request message was sent but its reply did not come in time (RequestTimeoutException)."""
