"""The click options that several ``pocketmq`` commands share, written once so that the same
flag means and reads the same everywhere. Each command still gives the help text that fits it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pocketmq.grpc import DEFAULT_GRPC_PORT

F = TypeVar("F", bound=Callable[..., Any])
# A TCP port to listen on (0: any free one).
PORT = click.IntRange(0, 65535)


def config_option(help_text: str) -> Callable[[F], F]:
    """``-c/--config FILE``: a properties file with RocketMQ's names."""
    return click.option(
        "-c",
        "--config",
        "conf",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=help_text,
    )


def store_option(help_text: str, default: Path | None = None) -> Callable[[F], F]:
    """``--store DIRECTORY``: the store directory, shown with its default where it has one."""
    # Left out rather than None when there is no default: click tells an explicit None apart.
    extra: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option(
        "--store",
        "store_dir",
        type=click.Path(file_okay=False, path_type=Path),
        help=help_text,
        **extra,
    )


def listen_option(fn: F) -> F:
    """``--listen host:port``: where a single server role listens (parse it with parse_listen)."""
    return click.option(
        "--listen", default=None, help="host:port to listen on (port 0 picks a free one)."
    )(fn)


def grpc_port_option(fn: F) -> F:
    """``--grpc-port``: the broker's gRPC endpoint for 5.x clients."""
    return click.option(
        "--grpc-port",
        type=PORT,
        default=DEFAULT_GRPC_PORT,
        show_default=True,
        help="gRPC endpoint for 5.x clients (apache.rocketmq.v2); 0 picks a free port.",
    )(fn)


def ready_file_option(help_text: str) -> Callable[[F], F]:
    """``--ready-file FILE``: where a server writes its bound port(s) once serving, so that a
    test or a supervisor waits for the file instead of sleeping."""
    return click.option(
        "--ready-file", type=click.Path(dir_okay=False, path_type=Path), help=help_text
    )


def parse_listen(value: str) -> tuple[str, int]:
    """``--listen``'s value as (host, port).

    Raises:
        click.BadParameter: it is not host:port.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise click.BadParameter(f"{value!r} is not host:port (for example 127.0.0.1:9876)")
    return host, int(port)


def parse_epoch_ms(value: str, hint: str) -> int:
    """A time option's value: epoch milliseconds, or 'now'.

    Raises:
        click.BadParameter: neither.
    """
    try:
        return time.time_ns() // 1_000_000 if value == "now" else int(value)
    except ValueError:
        raise click.BadParameter("epoch milliseconds or 'now'", param_hint=hint) from None
