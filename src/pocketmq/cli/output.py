"""How `pocketmq admin` prints: a table for people (rich), the same rows as JSON for programs
(`--json`), progress bars on stderr for long work. Every verb prints through here so that
`--json` means the same thing everywhere: a list of objects keyed by the table's columns, or
the verb's own document where it has no table.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    """Adds `--json` (passed to the verb as `as_json`)."""
    option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
    return option(fn)


def emit_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def emit_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    as_json: bool,
    title: str | None = None,
    footer: str | None = None,
) -> None:
    """Rows as a table, or as a JSON list of {column: value} (footer is left out of JSON)."""
    rows = list(rows)
    if as_json:
        emit_json([dict(zip(columns, row, strict=True)) for row in rows])
        return
    table = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        # Piped output is for grep and scripts: never cut a cell to 80 columns.
        console = Console(soft_wrap=True, width=100_000)
    console.print(table)
    if footer:
        console.print(footer)


def _bar(*counter: ProgressColumn) -> Progress:
    console = Console(stderr=True)
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        *counter,
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def progress(items: Sequence[T], description: str) -> Iterator[T]:
    """Iterates items with a progress bar on stderr (shown only on a terminal)."""
    with _bar(MofNCompleteColumn()) as bar:
        yield from bar.track(items, total=len(items), description=description)


@contextlib.contextmanager
def byte_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr (only on a terminal) for work measured in bytes; yields
    update(description, done, total)."""
    with _bar(DownloadColumn()) as bar:
        task = bar.add_task("", total=None)

        def update(description: str, done: int, total: int) -> None:
            bar.update(task, description=description, completed=done, total=total)

        yield update
