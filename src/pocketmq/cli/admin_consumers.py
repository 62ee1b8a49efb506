"""``pocketmq admin reset-offset-by-time`` and ``consumer-status``: the mqadmin verbs that
reach a live consumer group through its brokers (INVOKE_BROKER_TO_RESET_OFFSET and
GET_CONSUMER_RUNNING_INFO). Neither moves an offline group: the broker refuses the reset
with CONSUMER_NOT_ONLINE, which is printed as the error.
"""

from __future__ import annotations

import time
from typing import Any

import click

from pocketmq.cli.admin import AdminError, _call, _echo_json, _route, _run
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import retry_topic
from pocketmq.remoting import RemotingClient


def _master_addrs(route: dict[str, Any]) -> list[str]:
    addrs = [b["brokerAddrs"].get("0") for b in route.get("brokerDatas", [])]
    return sorted(a for a in addrs if a)


@click.command("reset-offset-by-time")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True)
@click.option(
    "-s", "--timestamp", required=True,
    help="Epoch milliseconds, or 'now'; the group restarts at the first message stored then.",
)  # fmt: skip
@click.option(
    "-f/-F", "--force/--no-force", default=True,
    help="Also move the group forward (default); --no-force only moves it back.",
)  # fmt: skip
@click.pass_obj
def reset_offset_by_time(namesrv: str, group: str, topic: str, timestamp: str, force: bool) -> None:
    """Move a live consumer group's offsets in a topic to a time, on every broker of the
    topic; its consumers restart there at once. Prints the new offsets."""
    try:
        at_ms = time.time_ns() // 1_000_000 if timestamp == "now" else int(timestamp)
    except ValueError:
        raise click.BadParameter("epoch milliseconds or 'now'", param_hint="-s") from None

    async def go(c: RemotingClient) -> dict[str, int]:
        table: dict[str, int] = {}
        header = {"topic": topic, "group": group, "timestamp": at_ms, "isForce": force}
        for addr in _master_addrs(await _route(c, namesrv, topic)):
            resp = await _call(c, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
            try:
                for key, offset in json_body.loads(resp.body)["offsetTable"].items():
                    _, broker, queue_id = json_body.parse_message_queue_key(key)
                    table[f"{broker}:{queue_id}"] = int(offset)
            except (RemoteProtocolError, KeyError, TypeError, ValueError) as exc:
                raise AdminError(f"{addr} sent a bad reset offset body: {exc!r}") from exc
        return table

    _echo_json(_run(go))


@click.command("consumer-status")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--client-id", default=None, help="Only this consumer.")
@click.pass_obj
def consumer_status(namesrv: str, group: str, client_id: str | None) -> None:
    """Each live consumer's running info (settings, subscriptions, held queues), keyed by
    client id, as its client reports it."""

    async def go(c: RemotingClient) -> dict[str, Any]:
        # Every broker a consumer of the group heartbeats knows the group's retry topic.
        addrs = _master_addrs(await _route(c, namesrv, retry_topic(group)))
        if not addrs:
            raise AdminError(f"no broker knows the group {group}")
        resp = await _call(c, addrs[0], RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                           {"consumerGroup": group})  # fmt: skip
        ids = [client_id] if client_id else json_body.loads(resp.body)["consumerIdList"]
        out: dict[str, Any] = {}
        for cid in ids:
            header = {"consumerGroup": group, "clientId": cid, "jstackEnable": False}
            info = await _call(c, addrs[0], RequestCode.GET_CONSUMER_RUNNING_INFO, header)
            out[cid] = json_body.loads(info.body)
        return out

    _echo_json(_run(go))
