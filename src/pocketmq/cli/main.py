"""``pocketmq``: the command line entry point. Nothing imports this package."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click

from pocketmq import __version__
from pocketmq.cli.lazy import LazyGroup
from pocketmq.protocol import native

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run coro on uvloop when it is installed, else on asyncio's default loop; the stack
    dump a stop armed (servers.stop_on_signals) is cancelled once everything has ended."""
    try:
        import uvloop
    except ImportError:
        run: Callable[[Coroutine[Any, Any, T]], T] = asyncio.run
    else:
        run = uvloop.run
    try:
        return run(coro)
    finally:
        faulthandler.cancel_dump_traceback_later()


@click.group(
    cls=LazyGroup,
    lazy={
        "admin": "pocketmq.cli.admin:admin",
        "store": "pocketmq.cli.store_cmd:store",
        "namesrv": "pocketmq.cli.servers:namesrv",
        "broker": "pocketmq.cli.servers:broker",
        "serve": "pocketmq.cli.servers:serve",
        "dashboard": "pocketmq.cli.dashboard:dashboard",
    },
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(
    __version__,
    prog_name="pocketmq",
    message=f"%(prog)s, version %(version)s, {native.DESCRIPTION}",
)
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """pocketmq: a RocketMQ-compatible message broker."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main() -> None:
    cli(prog_name="pocketmq")
