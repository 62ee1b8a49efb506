"""``pocketmq store ...``: inspect and benchmark a store directory."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import click
import orjson

from pocketmq.cli.options import F, config_option
from pocketmq.cli.output import byte_progress
from pocketmq.errors import PocketMQError
from pocketmq.store.bench import print_progress_line, result_json, run_bench
from pocketmq.store.config import FlushDiskType, StoreConfig
from pocketmq.store.inspect import Report, inspect_store


@click.group()
def store() -> None:
    """Work with a store directory (commitlog, consume queues, index)."""


def _json_and_config_options(what: str, conf_help: str) -> Callable[[F], F]:
    """The two options every ``store`` command ends with: ``--json`` (print the WHAT as one
    JSON object) and ``-c/--config`` (a broker.conf with the store's settings)."""
    print_json = click.option(
        "--json", "as_json", is_flag=True, help=f"Print the {what} as one JSON object."
    )

    def decorate(fn: F) -> F:
        # click lists the options applied last first: --json before --config.
        return print_json(config_option(conf_help)(fn))

    return decorate


def _load_config(root: Path, conf: Path | None) -> StoreConfig:
    try:
        if conf is not None:
            return StoreConfig.from_file(conf, store_path_root_dir=root)
        return StoreConfig(store_path_root_dir=root)
    except PocketMQError as exc:
        raise click.UsageError(str(exc)) from exc


def _print_report(report: Report, verify: bool) -> None:
    click.echo(f"store {report.root}")
    click.echo(
        f"  commitlog: {report.commitlog_files} files, offsets "
        f"{report.commitlog_min_offset}..{report.commitlog_max_offset}, {report.records} records "
        f"({report.record_bytes} bytes), {report.not_in_queue} outside consume queues"
    )
    click.echo(f"  index: {report.index_files} files, {report.index_entries} entries")
    if report.queues:
        width = max(len(k) for k in report.queues)
        click.echo(
            f"  {'topic/queue':<{width}}  {'records':>9}  {'queue offsets':>17}  {'cq units':>9}"
        )
        for name, q in sorted(report.queues.items()):
            span = (
                f"{q.min_queue_offset}..{q.max_queue_offset}"
                if q.min_queue_offset is not None
                else "-"
            )
            click.echo(f"  {name:<{width}}  {q.records:>9}  {span:>17}  {q.cq_units:>9}")
    if verify:
        if report.problem_count:
            click.echo(f"verify: {report.problem_count} problems", err=True)
            for p in report.problems:
                click.echo(f"  {p}", err=True)
            if report.problem_count > len(report.problems):
                click.echo(
                    f"  ... and {report.problem_count - len(report.problems)} more", err=True
                )
        else:
            click.echo("verify: OK (every CRC, consume-queue unit and index entry checked)")


@store.command("inspect")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--verify",
    is_flag=True,
    help="Check every CRC, queue unit and index entry; exit 1 on any problem.",
)
@_json_and_config_options("report", "broker.conf with the store's sizes (index slots and entries).")
def inspect_cmd(directory: Path, verify: bool, as_json: bool, conf: Path | None) -> None:
    """Decode the store in DIRECTORY without changing it and summarize it per topic/queue."""
    config = _load_config(directory, conf)
    with byte_progress() as update:
        report = inspect_store(directory, verify=verify, config=config, progress=update)
    if as_json:
        click.echo(orjson.dumps(dataclasses.asdict(report)).decode())
    else:
        _print_report(report, verify)
    if verify and report.problem_count:
        sys.exit(1)


@store.command("bench")
@click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Store directory (kept after the run).",
)
@click.option("--count", default=100_000, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--size", default=1024, show_default=True, type=click.IntRange(min=0), help="Body bytes."
)
@click.option("--flush", type=click.Choice(["async", "sync"]), default="async", show_default=True)
@click.option(
    "--writers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Concurrent writers (SYNC_FLUSH group commit needs several).",
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Messages per put, to one queue, as a producer's send_batch (built before the clock).",
)
@click.option("--topics", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--queues", default=4, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--progress",
    is_flag=True,
    help='Print {"acked": N} at least every 100 ms: messages 0..N-1 are all acknowledged.',
)
@_json_and_config_options("result", "broker.conf with store settings (sizes, intervals).")
def bench_cmd(
    directory: Path,
    count: int,
    size: int,
    flush: str,
    writers: int,
    batch: int,
    topics: int,
    queues: int,
    progress: bool,
    as_json: bool,
    conf: Path | None,
) -> None:
    """Append COUNT messages to a real store and compare with a raw sequential write."""
    from pocketmq.cli.main import run_async

    config = _load_config(directory, conf)
    flush_type = FlushDiskType.SYNC_FLUSH if flush == "sync" else FlushDiskType.ASYNC_FLUSH
    try:
        result = run_async(
            run_bench(
                directory,
                count,
                size,
                flush_type,
                writers,
                topics,
                queues,
                progress=print_progress_line if progress else None,
                config=config,
                batch=batch,
            )
        )
    except PocketMQError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(result_json(result))
    else:
        click.echo(
            f"{result.acked}/{result.count} messages of {result.size} bytes, {result.flush}, "
            f"{result.writers} writer(s), {result.batch} per put: "
            f"{result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s} MB/s "
            f"acknowledged, {result.durable_mb_per_s} MB/s durable\n"
            f"raw sequential write of the same bytes: {result.raw_mb_per_s} MB/s; "
            f"store/raw = {result.ratio}\n"
            f"put latency (one put) p50 {result.put_p50_us} us, p99 {result.put_p99_us} us"
        )
        if result.fsync_bound_msgs_per_s:
            click.echo(
                f"fsync-bound rate for {result.writers * result.batch} records per fdatasync: "
                f"{result.fsync_bound_msgs_per_s:,.0f} msgs/s; store/bound = {result.fsync_ratio}"
            )
        if result.first_error:
            click.echo(f"{result.failed} messages failed; first: {result.first_error}", err=True)
    if result.failed:
        sys.exit(1)
