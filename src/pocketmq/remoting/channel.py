"""RemotingChannel: an asyncio protocol around one RemotingConnection, for both ends.

Either side can send requests and answer them: clients call brokers, and brokers call clients
back (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO).
Responses are matched to requests by ``opaque``; requests that arrive go to a handler which
returns a response, None (nothing to send), or an awaitable of either. A handler that raises is
answered with SYSTEM_ERROR and the same opaque; a request code nobody handles is answered with
REQUEST_CODE_NOT_SUPPORTED by the dispatcher, and logged once per code (UnsupportedCodes). A
one-way request is never answered, whatever its handler returns or raises: its sender keeps no
opaque to match an answer with (a Java client logs every such answer as unmatched), so a
refusal is logged here instead. A frame that breaks the protocol closes the connection, after
which every pending request fails with ConnectionError.

Reading pauses while the transport's write buffer is above its high-water mark, so a peer that
stops reading cannot make us buffer without bound.

Frames are coalesced per event-loop iteration: the first of an iteration goes to the transport
at once (a lone request or response waits for nothing), later ones (a group commit
acknowledging many sends, the answers to one read's worth of requests, the next requests of
the callers those answers woke) are written together, in order, when the iteration ends. A
read that brings several requests holds its first answer too: the answers of all of them go
in one write once what they wait for has run (the coalesced put whose callback answers the held
sends, the tasks of the others; BENCHMARKS.md, "One write for a read's answers").

A handler that takes runs (``TakesRuns``: the broker's dispatcher, for single sends) is given a
read's consecutive requests of one of its run codes together, still in the order they came
among the read's other requests, and answers each as it would have alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from pocketmq.errors import LocalProtocolError, RemoteProtocolError, RequestError
from pocketmq.pending import Pending
from pocketmq.protocol.acl_sign import SessionCredentials, sign_request
from pocketmq.protocol.codes import LanguageCode, ResponseCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.remoting import DEFAULT_MAX_FRAME, FLAG_ONEWAY, RemotingCommand
from pocketmq.protocol.versions import version_name

log = logging.getLogger(__name__)

# What a handler gives: a response, nothing (a one-way request), a Pending response (given
# later by a callback: for requests that wait many for one event) or an awaitable of one.
HandlerResult = (
    RemotingCommand | None | Pending[RemotingCommand] | Awaitable[RemotingCommand | None]
)
RequestHandler = Callable[["RemotingChannel", RemotingCommand], HandlerResult]
# A run of requests of one code taken at once: a result (or the exception that refused it)
# for each request, in order.
RunHandler = Callable[["RemotingChannel", list[RemotingCommand]], list[HandlerResult | Exception]]


@runtime_checkable
class TakesRuns(Protocol):
    """A request handler that also takes a read's consecutive requests of some codes as one
    run (``handle_run``): the sends of a pipelining producer share one pass through the
    broker's layers instead of a pass each (BENCHMARKS.md, "A read's sends as one run")."""

    @property
    def run_codes(self) -> Container[int]: ...

    def __call__(self, channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult: ...

    def handle_run(
        self, channel: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]: ...


class UnsupportedCodes:
    """Refuses request codes nobody here serves with REQUEST_CODE_NOT_SUPPORTED, logging each
    code once at WARNING with its first sender's address, version and language: an operator
    learns what a tool asked for, and a client that repeats the request cannot flood the log.
    """

    def __init__(self) -> None:
        # At most 65536 codes (a signed 16-bit field): the set stays small.
        self.logged: set[int] = set()

    def refuse(
        self, channel: RemotingChannel, cmd: RemotingCommand, remark: str
    ) -> RemotingCommand:
        if cmd.code not in self.logged:
            self.logged.add(cmd.code)
            try:
                language = LanguageCode(cmd.language).name
            except ValueError:
                language = f"language {cmd.language}"
            log.warning(
                "request code %d is not supported (first from %s, version %s (%d), %s); "
                "later requests with this code are refused without a log line",
                cmd.code, channel.peer, version_name(cmd.version), cmd.version, language,
            )  # fmt: skip
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)


# A request in flight: its answer's future, its deadline on the loop's clock, its timeout.
_Request = tuple[asyncio.Future[RemotingCommand], float, float]

# For channels without a handler (a client's connections): one log line per code and process.
_NO_HANDLER_CODES = UnsupportedCodes()


class RemotingChannel(asyncio.Protocol):
    def __init__(
        self,
        handler: RequestHandler | None = None,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_close: Callable[[RemotingChannel], None] | None = None,
    ) -> None:
        self.handler = handler
        # The handler when it takes runs of requests (checked once: a Protocol check is dear).
        self._runs = handler if isinstance(handler, TakesRuns) else None
        self.on_close = on_close
        self.conn = RemotingConnection(max_frame)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        # Kept: asyncio.get_running_loop() makes a getpid system call on CPython 3.11, and
        # every frame written and every request asked for a loop.
        self._loop = asyncio.get_running_loop()
        self.closed = self._loop.create_future()
        # Monotonic time of the last frame read or written: idle connections are closed.
        self.last_active = time.monotonic()
        # Requests sent and not yet answered: opaque -> (future, deadline, timeout).
        self._pending: dict[int, _Request] = {}
        # One timer, at the earliest deadline of _pending, expires late requests: a timer
        # armed and cancelled per request cost a tenth of a client's send (1.7 µs on uvloop),
        # where requests of one timeout need one timer operation per timeout's length.
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        # Free-form per-connection state for the server (client id, groups, ...).
        self.attributes: dict[str, Any] = {}
        # Frames held until this iteration ends; None when no frame was written in it.
        self._held: list[bytes] | None = None
        # In data_received, with more than one request read: answers are written when it
        # returns (_write_read_answers).
        self._reading = False
        # A client's ACL credentials: every request it sends is signed (AclClientRPCHook).
        self.credentials: SessionCredentials | None = None

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.transport is transport:
            return
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        requests = 0
        # Consecutive requests of one code the handler takes as a run, not yet handled.
        run: list[RemotingCommand] = []
        run_codes = self._runs.run_codes if self._runs is not None else frozenset()
        try:
            self.conn.receive_data(data)
            while (cmd := self.conn.next_command()) is not NEED_DATA:
                assert isinstance(cmd, RemotingCommand)
                if cmd.is_response:
                    request = self._pending.pop(cmd.opaque, None)
                    if request is not None and not request[0].done():
                        request[0].set_result(cmd)
                    continue
                requests += 1
                if requests == 1:
                    # More in this read: its answers are written together when it is done.
                    self._reading = self.conn.buffered > 0
                if run and cmd.code != run[0].code:
                    self._handle_run(run)  # handled in the order they came
                    run = []
                if cmd.code in run_codes:
                    run.append(cmd)
                else:
                    self._handle(cmd)
            if len(run) > 1:
                self._handle_run(run)
            elif run:  # a lone request: a call less
                self._handle(run[0])
        except RemoteProtocolError as exc:
            if run:
                self._handle_run(run)  # the requests before the bad frame are answered
            log.warning("closing %s: %s", self.peer, exc)
            self.close()
        finally:
            if self._reading:
                self._reading = False
                self._write_read_answers(requests)

    def _write_read_answers(self, requests: int) -> None:
        """Write the answers made in a ``data_received`` that read more than one request: once
        what it started for the others ran (their tasks, and the coalesced put whose callback
        answers the held sends), in one write with theirs (a system call spared, and a read of
        the client's); at once when only one request was complete."""
        held = self._held
        if not held:
            return
        if requests == 1 and self.is_open:
            self._write_first(held)
        else:
            self._loop.call_soon(self._write_held)

    def connection_lost(self, exc: Exception | None) -> None:
        err = ConnectionError(f"connection to {self.peer} closed")
        for fut, _, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if not self.closed.done():
            self.closed.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # ------------------------------------------------------------------ requests in

    def _handle(self, cmd: RemotingCommand) -> None:
        if self.handler is None:
            self._answer(cmd, _NO_HANDLER_CODES.refuse(self, cmd, "no handler here"))
            return
        try:
            result = self.handler(self, cmd)
        except Exception as exc:  # a request boundary: answer, keep serving
            self._fail(cmd, exc)
            return
        self._take(cmd, result)

    def _handle_run(self, run: list[RemotingCommand]) -> None:
        """Hand a run of requests to the handler at once; each is answered as ``_handle``
        answers one (a lone request is handled alone)."""
        if len(run) == 1:
            self._handle(run[0])
            return
        assert self._runs is not None
        try:
            results = self._runs.handle_run(self, run)
            if len(results) != len(run):
                raise RuntimeError(f"{len(results)} results for a run of {len(run)} requests")
        except Exception as exc:  # a request boundary, for each of the run
            for cmd in run:
                self._fail(cmd, exc)
            return
        for cmd, result in zip(run, results, strict=True):
            if isinstance(result, RemotingCommand) and not cmd.flag & FLAG_ONEWAY:
                self.send(result)  # what _take and _answer come to for most of a run
            elif isinstance(result, Exception):
                self._fail(cmd, result)
            else:
                self._take(cmd, result)

    def _take(self, cmd: RemotingCommand, result: HandlerResult) -> None:
        """Answer ``cmd`` with what its handler gave, now or once it is ready."""
        if isinstance(result, RemotingCommand):
            if not cmd.flag & FLAG_ONEWAY:
                self.send(result)  # _answer's common case, a call less
            else:
                self._answer(cmd, result)
        elif isinstance(result, Pending):
            result.then = functools.partial(self._settle, cmd)
        elif result is not None:  # an awaitable; the loop's own create_task: once per request
            task = self._loop.create_task(self._finish(cmd, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _finish(
        self, cmd: RemotingCommand, pending: Awaitable[RemotingCommand | None]
    ) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a request boundary
            self._fail(cmd, exc)
            return
        if response is not None:
            self._answer(cmd, response)

    def _settle(self, cmd: RemotingCommand, outcome: RemotingCommand | Exception) -> None:
        if isinstance(outcome, RemotingCommand):
            self._answer(cmd, outcome)
        else:
            self._fail(cmd, outcome)

    def _fail(self, cmd: RemotingCommand, exc: Exception) -> None:
        if isinstance(exc, RequestError):
            self._answer(cmd, cmd.response(exc.code, exc.remark))
            return
        log.exception("request code %d from %s failed", cmd.code, self.peer, exc_info=exc)
        self._answer(cmd, cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))

    def _answer(self, cmd: RemotingCommand, response: RemotingCommand) -> None:
        """Write the response to a request, unless the request was one-way: then a refusal is
        logged, since nobody waits for it."""
        if not cmd.is_oneway:
            self.send(response)
        elif response.code != ResponseCode.SUCCESS:
            log.warning("one-way request code %d from %s refused with code %d: %s",
                        cmd.code, self.peer, response.code, response.remark)  # fmt: skip

    # ------------------------------------------------------------------ out

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, cmd: RemotingCommand) -> None:
        """Write a command; dropped (with a log line) if the connection is already closed."""
        if not self.is_open:
            return
        assert self.transport is not None
        try:
            head, body = self.conn.send_parts(cmd)
        except LocalProtocolError as exc:
            log.error("cannot send code %d to %s: %s", cmd.code, self.peer, exc)
            if cmd.is_response:
                refusal = RemotingCommand(
                    code=ResponseCode.SYSTEM_ERROR,
                    opaque=cmd.opaque,
                    flag=cmd.flag,
                    remark=str(exc),
                    serialize_type=cmd.serialize_type,
                )
                self._write(*self.conn.send_parts(refusal))
            return
        self.last_active = time.monotonic()
        self._write(head, body)

    def _write(self, head: bytes, body: bytes) -> None:
        """Write a frame as its head and body: a vectored write when the body is not empty,
        so that a pull's body is never copied into one buffer with its header."""
        assert self.transport is not None
        held = self._held
        if held is None:
            if not self._reading:
                self._write_first((head, body) if body else (head,))
                return
            self._held = held = []  # written by _write_read_answers
        held.append(head)
        if body:
            held.append(body)

    def _write_first(self, parts: Sequence[bytes]) -> None:
        """Write the first frames of a loop turn now, and hold the turn's later ones."""
        assert self.transport is not None
        if len(parts) == 1:
            self.transport.write(parts[0])
        else:
            self.transport.writelines(parts)
        self._held = []
        self._loop.call_soon(self._write_held)

    def _write_held(self) -> None:
        held, self._held = self._held, None
        if held and self.is_open:
            assert self.transport is not None
            self.transport.writelines(held)

    async def invoke(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and wait for its response.

        Raises:
            ConnectionError: the connection is closed or closes before the answer.
            TimeoutError: no answer within timeout_s (the connection stays open).
        """
        if not self.is_open:
            raise ConnectionError(f"connection to {self.peer} is closed")
        cmd.opaque = self.conn.next_opaque()
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        loop = self._loop
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        deadline = loop.time() + timeout_s
        self._pending[cmd.opaque] = (fut, deadline, timeout_s)
        # Failed by the expiry timer, not asyncio.timeout's cancel-and-translate: this runs
        # once per request (a consumer's every pull).
        if self._expiry is None or deadline < self._expiry_at:
            self._expire_at(deadline)
        try:
            self.send(cmd)
            return await fut
        finally:
            self._pending.pop(cmd.opaque, None)

    def _expire_at(self, when: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = self._loop.call_at(when, self._expire_late)
        self._expiry_at = when

    def _expire_late(self) -> None:
        """Fail the requests past their deadline; the timer follows the earliest left."""
        self._expiry = None
        now = self._loop.time()
        earliest: float | None = None
        for fut, deadline, timeout_s in self._pending.values():
            if fut.done():
                continue  # its invoke has not taken it out yet
            if deadline <= now:
                fut.set_exception(TimeoutError(f"no answer within {timeout_s} s"))
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._expire_at(earliest)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.opaque = self.conn.next_opaque()
        cmd.flag |= FLAG_ONEWAY
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        self.send(cmd)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._write_held()  # close() still sends what the transport buffers: these too
            self.transport.close()

    async def aclose(self) -> None:
        self.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.closed
