"""``pocketmq namesrv | broker | serve``: run server roles in the foreground until SIGTERM or
SIGINT, then stop cleanly (the store is flushed and its abort marker removed).

A broker process serves 5.x clients itself on its gRPC endpoint (RocketMQ's local proxy
mode), whether it runs alone (``broker``) or next to a NameServer (``serve``)."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import io
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.cli.options import (
    PORT,
    config_option,
    grpc_port_option,
    listen_option,
    parse_listen,
    ready_file_option,
    store_option,
)
from pocketmq.conf import read_properties
from pocketmq.errors import ConfigError, PocketMQError, StoreError
from pocketmq.grpc.server import GrpcService
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NameServer
from pocketmq.protocol import native

log = logging.getLogger(__name__)


async def start_namesrv(config: NamesrvConfig) -> tuple[NameServer, int]:
    """Start a NameServer; the bound port comes back with it.

    Raises:
        click.ClickException: the address cannot be bound, or the settings persisted in
            configStorePath cannot be read.
    """
    server = NameServer(config)
    try:
        return server, await server.start()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {config.listen_host}:{config.listen_port}: {exc.strerror}"
        ) from exc


async def start_broker(config: BrokerConfig) -> tuple[Broker, int]:
    """Start a broker (its store is opened and recovered first); the bound port comes back.

    Raises:
        click.ClickException: the address cannot be bound or the store cannot be opened.
    """
    server = Broker(config)
    try:
        return server, await server.start()
    except (OSError, StoreError, ConfigError) as exc:
        raise click.ClickException(f"cannot start the broker: {exc}") from exc


def _metrics_port(broker: Broker) -> dict[str, int]:
    """The ready file's "metrics" entry, when the Prometheus endpoint is on."""
    return {} if broker.metrics is None else {"metrics": broker.metrics.port}


async def start_grpc(broker: Broker, host: str, port: int) -> int:
    """Give a started broker its gRPC endpoint, which runs while the broker is master (a
    slave serves no 5.x client: they all write); the broker stops it. Returns its bound port,
    or the one it will bind (0: any free one) on a slave.

    Raises:
        click.ClickException: the port cannot be bound.
    """
    service = GrpcService(broker, host, port)
    try:
        await broker.add_master_endpoint(service)
    except OSError as exc:
        raise click.ClickException(f"cannot start the gRPC endpoint: {exc}") from exc
    return service.port


def write_ready_file(path: Path, content: str) -> None:
    """Write atomically, so a waiting test never reads half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content + "\n")
    os.replace(tmp, path)


# Container allocations (net of those freed) between two young-generation collections, not
# CPython's 700: a batch of 256 messages in flight is about as many objects, and a collection
# walks every young one still alive, and then again as it ages (5 % of the broker's CPU under
# W1-shaped batches; BENCHMARKS.md, "Fewer garbage collections"). Objects that reference
# counting frees never reach a collection, so the live ones, not this figure, bound its length.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Keep what start-up allocated (modules, protobuf descriptors, configs: some 40,000
    objects) out of every later garbage collection, and collect the young generation less
    often. A full collection walks every tracked object, for milliseconds during which the
    event loop answers nobody: a send's whole latency budget."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT; install it before starting anything. A stop that
    hangs says where: every task's stack is logged STALLED_STOP_S after the signal, every
    thread's (faulthandler, to stderr) half as long again later."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def stopping() -> None:
        if stop.is_set():
            return
        stop.set()
        loop.call_later(STALLED_STOP_S, _log_stalled_stop)
        faulthandler.dump_traceback_later(STALLED_STOP_S * 1.5)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    return stop


# Seconds after SIGTERM by which a server has stopped (it takes well under one).
STALLED_STOP_S = 10.0


def _log_stalled_stop() -> None:
    stacks = []
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        stacks.append(out.getvalue())
    log.warning(
        "still stopping %.0f s after the signal; its %d tasks:\n%s",
        STALLED_STOP_S, len(stacks), "\n".join(stacks),
    )  # fmt: skip


def stop_at_stdin_eof(stop: asyncio.Event) -> None:
    """Set ``stop`` once standard input reaches its end: a parent holding the write end of a
    pipe to it (pocketmq.testing) takes the server down with it, even when the parent is
    killed and cannot signal."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not os.read(fd, 4096):
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, readable)


@click.command("namesrv")
@config_option("namesrv.conf (listenPort, kvConfigPath, ...).")
@listen_option
@ready_file_option("Write the bound port here once listening.")
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
        server, port = await start_namesrv(config)
        click.echo(f"pocketmq name server listening on {config.listen_host}:{port}")
        tune_gc()
        if ready_file is not None:
            write_ready_file(ready_file, str(port))
        try:
            await stop.wait()
        finally:
            await server.stop()

    run_async(serve())


def _broker_config(
    conf: Path | None, store_dir: Path | None, listen: str | None, namesrv_addr: str | None
) -> BrokerConfig:
    overrides: dict[str, Any] = {}
    store_overrides: dict[str, Any] = {}
    if listen is not None:
        overrides["listen_host"], overrides["listen_port"] = parse_listen(listen)
        overrides["broker_ip1"] = overrides["listen_host"]
    if namesrv_addr is not None:
        overrides["namesrv_addr"] = namesrv_addr
    if store_dir is not None:
        store_overrides["store_path_root_dir"] = store_dir.resolve()
    if conf is not None:
        # UPDATE_BROKER_CONFIG persists what it accepts here.
        overrides["broker_config_path"] = conf.resolve()
    try:
        props = read_properties(conf) if conf is not None else {}
        return BrokerConfig.from_properties(props, store_overrides=store_overrides, **overrides)
    except PocketMQError as exc:
        raise click.UsageError(str(exc)) from exc


@click.command("broker")
@config_option("broker.conf with RocketMQ's property names.")
@store_option("Store directory (storePathRootDir).")
@listen_option
@click.option("-n", "--namesrv-addr", default=None, help="NameServer address(es), ';'-separated.")
@grpc_port_option
@ready_file_option(
    'Write {"broker": port, "grpc": port, "ha": port[, "metrics": port]} here once serving.'
)
def broker(
    conf: Path | None,
    store_dir: Path | None,
    listen: str | None,
    namesrv_addr: str | None,
    grpc_port: int,
    ready_file: Path | None,
) -> None:
    """Run a broker (default 127.0.0.1:10911, gRPC endpoint on port 8081, store in ~/store)."""
    from pocketmq.cli.main import run_async

    config = _broker_config(conf, store_dir, listen, namesrv_addr)

    async def serve() -> None:
        stop = stop_on_signals()
        server, port = await start_broker(config)
        try:
            g_port = await start_grpc(server, config.listen_host, grpc_port)
        except click.ClickException:
            await server.stop()
            raise
        click.echo(
            f"pocketmq broker {config.broker_name} listening on {server.config.broker_addr}, "
            f"gRPC endpoint {config.listen_host}:{g_port}, hot path {native.DESCRIPTION}"
        )
        tune_gc()
        if ready_file is not None:
            write_ready_file(
                ready_file,
                json.dumps(
                    {"broker": port, "grpc": g_port, "ha": server.ha_port, **_metrics_port(server)}
                ),
            )
        try:
            await stop.wait()
        finally:
            await server.stop()

    run_async(serve())


@click.command("serve")
@config_option("broker.conf with RocketMQ's property names.")
@store_option("Store directory.", default=Path("data/store"))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--namesrv-port", type=PORT, default=9876, show_default=True)
@click.option("--broker-port", type=PORT, default=10911, show_default=True)
@grpc_port_option
@ready_file_option('Write {"namesrv": port, "broker": port, "grpc": port} here once serving.')
@click.option(
    "--stop-on-stdin-eof",
    is_flag=True,
    help="Stop (as on SIGTERM) when standard input is closed: a parent's pipe is a lifeline.",
)
def serve(
    conf: Path | None,
    store_dir: Path,
    host: str,
    namesrv_port: int,
    broker_port: int,
    grpc_port: int,
    ready_file: Path | None,
    stop_on_stdin_eof: bool,
) -> None:
    """Run NameServer + broker + the gRPC endpoint in one process with an embedded store."""
    from pocketmq.cli.main import run_async

    async def main() -> None:
        stop = stop_on_signals()
        if stop_on_stdin_eof:
            stop_at_stdin_eof(stop)
        namesrv_server, ns_port = await start_namesrv(
            NamesrvConfig(listen_host=host, listen_port=namesrv_port,
                          kv_config_path=store_dir.resolve() / "namesrv" / "kvConfig.json",
                          config_store_path=store_dir.resolve() / "namesrv" / "namesrv.properties")
        )  # fmt: skip
        config = _broker_config(conf, store_dir, f"{host}:{broker_port}", f"{host}:{ns_port}")
        try:
            broker_server, b_port = await start_broker(config)
        except click.ClickException:
            await namesrv_server.stop()
            raise
        try:
            g_port = await start_grpc(broker_server, host, grpc_port)
        except click.ClickException:
            await broker_server.stop()
            await namesrv_server.stop()
            raise
        click.echo(
            f"pocketmq serving: name server {host}:{ns_port}, broker {host}:{b_port}, "
            f"gRPC endpoint {host}:{g_port}, store {store_dir}, hot path {native.DESCRIPTION}\n"
            f"send a first message with any RocketMQ client: namesrv address {host}:{ns_port} "
            f"(4.x), endpoints {host}:{g_port} (5.x)"
        )
        tune_gc()
        if ready_file is not None:
            write_ready_file(
                ready_file,
                json.dumps(
                    {
                        "namesrv": ns_port,
                        "broker": b_port,
                        "grpc": g_port,
                        **_metrics_port(broker_server),
                    }
                ),
            )
        try:
            await stop.wait()
        finally:
            await broker_server.stop()
            await namesrv_server.stop()

    run_async(main())
