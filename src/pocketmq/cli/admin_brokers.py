"""``pocketmq admin`` verbs about brokers and NameServers: ``broker-status`` (every broker with
its role, failover epoch and replication lag: mqadmin clusterList / brokerStatus in one
table), ``wipe-write-perm`` / ``add-write-perm`` (a broker's write permission at the
NameServers), ``get-namesrv-config`` / ``update-namesrv-config``.
"""

from __future__ import annotations

import click

from pocketmq.admin import cluster
from pocketmq.cli.admin import run_admin
from pocketmq.cli.output import emit_json, emit_table, json_option


@click.command("broker-status")
@json_option
@click.pass_obj
def broker_status(namesrv: str, as_json: bool) -> None:
    """Each broker's role, failover epoch, max offset and replication lag."""
    rows = run_admin(namesrv, cluster.broker_rows)
    masters = {r.name: r for r in rows if r.broker_id == 0}
    table = []
    for row in rows:
        lag_bytes, lag_s = cluster.lag_of(row, masters.get(row.name))
        table.append((
            row.cluster, row.name, row.broker_id, row.addr,
            row.info.get("brokerRole", "UNREACHABLE"), row.info.get("failoverEpoch", "-"),
            row.info.get("commitLogMaxOffset", "-"), lag_bytes, lag_s,
        ))  # fmt: skip
    columns = ["cluster", "broker", "id", "address", "role", "epoch", "max offset",
               "lag bytes", "lag s"]  # fmt: skip
    emit_table(columns, table, as_json=as_json)


def _perm_verb(namesrv: str, broker_name: str, wipe: bool, as_json: bool) -> None:
    fn = cluster.wipe_write_perm if wipe else cluster.add_write_perm
    done = run_admin(namesrv, lambda c: fn(c, broker_name))
    rows = [(addr, broker_name, count) for addr, count in done]
    emit_table(["namesrv", "broker", "topics changed"], rows, as_json=as_json)


@click.command("wipe-write-perm")
@click.option("-b", "--broker-name", required=True, help="The broker name (all its addresses).")
@json_option
@click.pass_obj
def wipe_write_perm(namesrv: str, broker_name: str, as_json: bool) -> None:
    """Take write permission from a broker's topics at every NameServer: producers stop
    choosing it (consumers still read it) until add-write-perm or its next topic change."""
    _perm_verb(namesrv, broker_name, True, as_json)


@click.command("add-write-perm")
@click.option("-b", "--broker-name", required=True, help="The broker name (all its addresses).")
@json_option
@click.pass_obj
def add_write_perm(namesrv: str, broker_name: str, as_json: bool) -> None:
    """Make a broker's topics readable and writable again at every NameServer."""
    _perm_verb(namesrv, broker_name, False, as_json)


@click.command("get-namesrv-config")
@json_option
@click.pass_obj
def get_namesrv_config(namesrv: str, as_json: bool) -> None:
    """Each NameServer's settings, under RocketMQ's names."""
    configs = run_admin(namesrv, cluster.namesrv_config)
    if as_json:
        emit_json(configs)
        return
    rows = [(addr, k, v) for addr, cfg in configs.items() for k, v in sorted(cfg.items())]
    emit_table(["namesrv", "setting", "value"], rows, as_json=False)


@click.command("update-namesrv-config")
@click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
@json_option
@click.pass_obj
def update_namesrv_config(namesrv: str, settings: tuple[str, ...], as_json: bool) -> None:
    """Change settings of every NameServer (RocketMQ's names, e.g.
    scanNotActiveBrokerInterval=10000). A NameServer refuses keys it does not know or cannot
    change while running, and bad values; pocketmq's persists what it accepts."""
    pairs: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="SETTINGS")
        pairs[key.strip()] = value.strip()
    done = run_admin(namesrv, lambda c: cluster.update_namesrv_config(c, pairs))
    rows = [(addr, k, v, "OK") for addr in done for k, v in pairs.items()]
    emit_table(["namesrv", "setting", "value", "result"], rows, as_json=as_json)
