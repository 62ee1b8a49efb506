"""``pocketmq dashboard``: the web console (pocketmq/dashboard) as its own process."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pocketmq.cli.options import listen_option, parse_listen, ready_file_option
from pocketmq.cli.servers import stop_on_signals, write_ready_file


@click.command("dashboard")
@click.option(
    "-n", "--namesrv-addr", default="127.0.0.1:9876", show_default=True,
    help="NameServer address(es), ';'-separated: pocketmq's or Apache RocketMQ's.",
)  # fmt: skip
@listen_option
@click.option(
    "--sample-interval", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
    help="Seconds between the samples the charts draw.",
)  # fmt: skip
@ready_file_option('Write {"http": port} here once serving.')
def dashboard(
    namesrv_addr: str, listen: str | None, sample_interval: float, ready_file: Path | None
) -> None:
    """Serve the web dashboard (default http://127.0.0.1:8082)."""
    try:
        from aiohttp import web

        from pocketmq.dashboard.app import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs its extra: pip install 'pocketmq[dashboard]' ({exc})"
        ) from exc
    from pocketmq.cli.main import run_async

    host, port = parse_listen(listen) if listen is not None else ("127.0.0.1", 8082)

    async def serve() -> None:
        stop = stop_on_signals()
        runner = web.AppRunner(create_app(namesrv_addr, sample_interval_s=sample_interval))
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc
        bound = runner.addresses[0][1]
        click.echo(f"pocketmq dashboard on http://{host}:{bound} (NameServer {namesrv_addr})")
        if ready_file is not None:
            write_ready_file(ready_file, json.dumps({"http": bound}))
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    run_async(serve())
