"""``pocketmq``: the command line entry point. Nothing imports this package."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from pocketmq import __version__
from pocketmq.cli.admin import admin
from pocketmq.cli.admin_brokers import broker_status
from pocketmq.cli.admin_consumers import consumer_status, reset_offset_by_time
from pocketmq.cli.admin_stats import broker_consume_stats, stats_all
from pocketmq.cli.dashboard import dashboard
from pocketmq.cli.servers import broker, namesrv, serve
from pocketmq.cli.store_cmd import store
from pocketmq.protocol import native

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run coro on uvloop when it is installed, else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


cli.add_command(store)
cli.add_command(namesrv)
cli.add_command(broker)
cli.add_command(serve)
cli.add_command(admin)
cli.add_command(dashboard)
admin.add_command(reset_offset_by_time)
admin.add_command(consumer_status)
admin.add_command(broker_status)
admin.add_command(stats_all)
admin.add_command(broker_consume_stats)


def main() -> None:
    cli(prog_name="pocketmq")
