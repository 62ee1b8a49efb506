"""``pocketmq namesrv``: run server roles in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import click

from pocketmq.errors import PocketMQError
from pocketmq.namesrv.server import NameServer, NamesrvConfig


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise click.BadParameter(f"{value!r} is not host:port (for example 127.0.0.1:9876)")
    return host, int(port)


def write_ready_file(path: Path, port: int) -> None:
    """Write the bound port atomically, so a waiting test never reads half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT; install it before starting anything."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


@click.command("namesrv")
@click.option(
    "-c",
    "--config",
    "conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="namesrv.conf (listenPort, kvConfigPath, ...).",
)
@click.option("--listen", default=None, help="host:port to listen on (port 0 picks a free one).")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the bound port here once listening.",
)
def namesrv(conf: Path | None, listen: str | None, ready_file: Path | None) -> None:
    """Run a NameServer (default 127.0.0.1:9876)."""
    from pocketmq.cli.main import run_async

    overrides: dict[str, object] = {}
    if listen is not None:
        overrides["listen_host"], overrides["listen_port"] = parse_listen(listen)
    try:
        config = NamesrvConfig.from_file(conf, **overrides) if conf else NamesrvConfig(**overrides)  # type: ignore[arg-type]
    except PocketMQError as exc:
        raise click.UsageError(str(exc)) from exc

    async def serve() -> None:
        stop = stop_on_signals()
        server = NameServer(config)
        try:
            port = await server.start()
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on {config.listen_host}:{config.listen_port}: {exc.strerror}"
            ) from exc
        click.echo(f"pocketmq name server listening on {config.listen_host}:{port}")
        if ready_file is not None:
            write_ready_file(ready_file, port)
        try:
            await stop.wait()
        finally:
            await server.stop()

    run_async(serve())
