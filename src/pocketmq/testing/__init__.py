"""pocketmq.testing: a real pocketmq server for the tests of applications that use RocketMQ.

- ``PocketMQServer``: ``pocketmq serve`` (NameServer + broker + gRPC endpoint) on free ports
  with a temporary store; ``with PocketMQServer() as s:`` starts it and waits until every role
  answers, then stops it and removes the store. Its addresses: ``s.namesrv_addr`` (4.x
  clients), ``s.grpc_endpoint`` (5.x clients), ``s.broker_addr``, ``s.store_dir``.
- ``server()``: the same as an async context manager, ``async with server() as s:``.
- The pytest plugin (``pocketmq.testing.plugin``, registered through the ``pytest11`` entry
  point, so installing pocketmq is enough): fixtures ``pocketmq_server`` (a fresh server for
  each test) and ``pocketmq_session_server`` (one shared by the whole session).

The server runs in a child process, not in the test's process on a thread of its own, because
a user's test is free to do what would break an in-process server or be broken by it:

- block its own thread or event loop (a sync client waiting on a reply, a debugger stopped at a
  breakpoint), which in-process would also starve a server sharing the GIL-bound interpreter;
- use the official 5.x client, whose generated ``apache.rocketmq.v2`` protobuf code cannot be
  loaded in one process with pocketmq's (the same names registered twice);
- fork (multiprocessing, a worker pool), which duplicates whatever threads and mmaps an
  in-process broker holds, or install its own signal handlers, loop policy and log config;
- crash or be killed: the child notices its parent's end on its stdin and stops by itself,
  and teardown kills it by PID when SIGTERM is not enough.

It is the program users run (``pocketmq serve``), so tests exercise what production runs.
Readiness is checked by requests, never by sleeping: the NameServer must list the broker, the
broker answer GET_BROKER_RUNTIME_INFO and the gRPC endpoint an HTTP/2 handshake.

Importing this package loads nothing but itself: the names above are resolved on first use,
since pytest imports the plugin (and so this package) in every run of everyone who installed
pocketmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pocketmq.testing.process import (
        PocketMQServer,
        ServerError,
        ServerExitError,
        ServerStartError,
        server,
    )

__all__ = ["PocketMQServer", "ServerError", "ServerExitError", "ServerStartError", "server"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pocketmq.testing import process

        return getattr(process, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
