"""`pocketmq --version` names the implementation of the hot path that is active."""

from __future__ import annotations

from click.testing import CliRunner

from pocketmq import __version__
from pocketmq.cli.main import cli
from pocketmq.protocol import native


def test_version_names_the_active_implementation() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    expected = "native" if native.IMPLEMENTATION == "native" else "pure Python"
    assert result.output == f"pocketmq, version {__version__}, {native.DESCRIPTION}\n"
    assert native.DESCRIPTION.startswith(expected)
