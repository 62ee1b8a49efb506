"""What the gRPC endpoint reads off every call: the client's metadata and address, requests
that do not decode, and (with the broker's ACL on) requests the ACL refuses."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError

log = logging.getLogger(__name__)

# The generated servicer is untyped; handlers take the context of any call.
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


@dataclass(frozen=True, slots=True)
class ClientMeta:
    """What a 5.x client says about itself in the metadata of every call."""

    client_id: str
    request_id: str
    language: str
    client_version: str
    namespace: str
    # What the broker's ACL checks (aclEnable): the signature over the date-time.
    authorization: str
    date_time: str


_CLIENT_ID = "x-mq-client-id"


def client_meta(context: Context) -> ClientMeta:
    metadata = context.invocation_metadata() or ()
    values = {key: value for key, value in metadata if isinstance(value, str)}
    return ClientMeta(
        client_id=values.get(_CLIENT_ID, ""),
        request_id=values.get("x-mq-request-id", ""),
        language=values.get("x-mq-language", ""),
        client_version=values.get("x-mq-client-version", ""),
        namespace=values.get("x-mq-namespace", ""),
        authorization=values.get("authorization", ""),
        date_time=values.get("x-mq-date-time", ""),
    )


def client_id(context: Context) -> str:
    """``client_meta(context).client_id`` without the dict and the record: the one field
    most calls need, read on every call."""
    found = ""
    for key, value in context.invocation_metadata() or ():
        if key == _CLIENT_ID and isinstance(value, str):
            found = value  # the last one wins, as in client_meta
    return found


def peer_host(context: Context) -> tuple[str, int]:
    """The client's address as gRPC reports it (``ipv4:1.2.3.4:5`` or ``ipv6:[::1]:5``); the
    loopback address when it is not an IP socket, since records need an address."""
    return _host_of(context.peer())


@functools.lru_cache(maxsize=1024)
def _host_of(peer: str) -> tuple[str, int]:
    # Cached: every send reads it, and a client keeps its connection (its peer) for many.
    kind, _, rest = peer.partition(":")
    host, _, port = rest.rpartition(":")
    if kind in ("ipv4", "ipv6") and port.isdigit():
        return host.strip("[]"), int(port)
    return "127.0.0.1", 0


class _Undecodable:
    """What the request deserializer yields for bytes that are not the request message."""

    def __init__(self, error: DecodeError) -> None:
        self.error = error


# Why the ACL refuses a request message of a call; None: allowed.
Admission = Callable[[Any, Context], str | None]


class RejectUndecodable(grpc.aio.ServerInterceptor):
    """grpc.aio answers a request its deserializer cannot parse with UNKNOWN ("Unexpected
    DecodeError"); the fault is the client's, so it gets INVALID_ARGUMENT, and only the
    handlers of served methods run with decoded messages. A method's wrapped handler is built
    once: grpc.aio asks for it on every call.

    With ``admit`` (the broker's ACL), every decoded request message, each of a stream too, is
    checked before its handler sees it, as RocketMQ's AuthenticationInterceptor does; a refusal
    ends the call with PERMISSION_DENIED, the status RocketMQ's proxy closes it with."""

    def __init__(self, admit: Admission | None = None) -> None:
        self._wrapped: dict[str, Any] = {}
        self._admit = admit

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            wrapped = self._wrap(method, await continuation(handler_call_details), self._admit)
            if wrapped is not None:
                self._wrapped[method] = wrapped
        return wrapped

    @staticmethod
    def _wrap(method: str, handler: Any, admit: Admission | None) -> Any:
        if handler is None or handler.request_deserializer is None:
            return handler
        decode = handler.request_deserializer

        def deserializer(data: bytes) -> Any:
            try:
                return decode(data)
            except DecodeError as exc:
                return _Undecodable(exc)

        async def screen(context: Context, request: Any) -> None:
            if isinstance(request, _Undecodable):
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{method}: undecodable request: {request.error}",
                )
            if admit is not None and (why := admit(request, context)) is not None:
                log.warning("ACL refused %s from %s with PERMISSION_DENIED: %s",
                            method, context.peer(), why)  # fmt: skip
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

        if handler.unary_unary is not None:
            unary = handler.unary_unary

            async def unary_unary(request: Any, context: Context) -> Any:
                if admit is not None or isinstance(request, _Undecodable):
                    await screen(context, request)  # a coroutine per call only when it may abort
                return await unary(request, context)

            return handler._replace(request_deserializer=deserializer, unary_unary=unary_unary)
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            async def unary_stream(request: Any, context: Context) -> AsyncIterator[Any]:
                await screen(context, request)
                async for response in streaming(request, context):
                    yield response

            return handler._replace(request_deserializer=deserializer, unary_stream=unary_stream)
        if handler.stream_stream is not None:
            bidi = handler.stream_stream

            async def stream_stream(requests: AsyncIterator[Any], context: Context) -> Any:
                async def checked() -> AsyncIterator[Any]:
                    async for request in requests:
                        await screen(context, request)
                        yield request

                async for response in bidi(checked(), context):
                    yield response

            return handler._replace(request_deserializer=deserializer, stream_stream=stream_stream)
        return handler
