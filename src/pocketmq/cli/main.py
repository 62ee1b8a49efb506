"""``pocketmq``: the command line entry point. Nothing imports this package."""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from pocketmq import __version__
from pocketmq.cli import admin_brokers, admin_consumers, admin_messages
from pocketmq.cli.admin import admin
from pocketmq.cli.admin_groups_topics import GROUPS_TOPICS_VERBS
from pocketmq.cli.admin_query_msg import QUERY_MSG_VERBS
from pocketmq.cli.admin_stats import broker_consume_stats, stats_all
from pocketmq.protocol import native

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run coro on uvloop when it is installed, else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


class LazyGroup(click.Group):
    """A group whose heavy commands are imported when invoked: the servers pull in grpcio,
    protobuf, the broker and the store (about half a second), which `pocketmq admin ...`
    must not pay on every call."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy  # command name -> "module:attribute"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command), target
        return command


@click.group(
    cls=LazyGroup,
    lazy={
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


cli.add_command(admin)
for _verb in (
    admin_brokers.broker_status,
    admin_brokers.wipe_write_perm,
    admin_brokers.add_write_perm,
    admin_brokers.get_namesrv_config,
    admin_brokers.update_namesrv_config,
    admin_consumers.consumer_progress,
    admin_consumers.subscription_group,
    admin_consumers.update_subscription_group,
    admin_consumers.delete_subscription_group,
    admin_consumers.reset_offset_by_time,
    admin_consumers.consumer_status,
    admin_messages.send_message,
    admin_messages.consume_message,
    admin_messages.print_msg,
    *GROUPS_TOPICS_VERBS,
    *QUERY_MSG_VERBS,
    stats_all,
    broker_consume_stats,
):
    admin.add_command(_verb)


def main() -> None:
    cli(prog_name="pocketmq")
