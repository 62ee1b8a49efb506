"""The command line's verbs are imported when invoked: each lazy name must lead to the command
of that name, and every command the cli modules define must be reachable by its name."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click
from click.testing import CliRunner

import pocketmq.cli
from pocketmq.cli.lazy import LazyGroup
from pocketmq.cli.main import cli


def _commands_of(group: click.Group) -> dict[str, click.Command]:
    ctx = click.Context(group)
    found = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        assert command.name == name, f"{name} leads to {command.name}"
        found[name] = command
    return found


def test_every_lazy_name_leads_to_the_command_of_that_name() -> None:
    top = _commands_of(cli)
    admin = top["admin"]
    assert isinstance(admin, LazyGroup)
    assert set(_commands_of(admin)) >= set(admin.lazy)


def test_every_command_of_the_cli_modules_is_reachable() -> None:
    reachable = {id(c) for c in _commands_of(cli).values()}
    for group in [c for c in _commands_of(cli).values() if isinstance(c, click.Group)]:
        reachable |= {id(c) for c in _commands_of(group).values()}
    for info in pkgutil.iter_modules(pocketmq.cli.__path__):
        if info.name == "__main__":  # runs the command line when imported
            continue
        module = importlib.import_module(f"pocketmq.cli.{info.name}")
        for attr, value in vars(module).items():
            if isinstance(value, click.Command) and value is not cli:
                assert id(value) in reachable, f"pocketmq.cli.{info.name}.{attr}"


def test_a_verb_runs_without_the_other_verbs_or_the_servers() -> None:
    code = (
        "import sys\n"
        "from pocketmq.cli.main import cli\n"
        "try:\n"
        "    cli(['admin', 'update-topic', '--help'], prog_name='pocketmq')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('pocketmq.', 'grpc')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(out.splitlines()[-1].split())
    assert "pocketmq.cli.admin" in loaded
    assert not {m for m in loaded if m.startswith("pocketmq.cli.admin_")}, loaded
    assert not {m for m in loaded if m.startswith(("pocketmq.broker", "pocketmq.store", "grpc"))}


def test_the_admin_help_lists_every_verb() -> None:
    result = CliRunner().invoke(cli, ["admin", "--help"])
    assert result.exit_code == 0
    for verb in ("update-topic", "broker-status", "query-msg-by-key", "stats-all"):
        assert verb in result.output


def test_server_ports_out_of_range_are_refused_before_anything_starts() -> None:
    for argv, option in (
        (["serve", "--namesrv-port", "-1"], "--namesrv-port"),
        (["serve", "--broker-port", "70000"], "--broker-port"),
        (["serve", "--grpc-port", "65536"], "--grpc-port"),
        (["broker", "--grpc-port", "-2"], "--grpc-port"),
    ):
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 2, (argv, result.output)
        assert f"Invalid value for '{option}'" in result.output
        assert "is not in the range 0<=x<=65535" in result.output
