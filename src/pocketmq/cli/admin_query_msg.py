"""``pocketmq admin query-msg-by-id | -by-key | -by-unique-key | -by-offset``: find messages
(admin/msg_query.py) and print each with what every group consuming its topic did with it
(mqadmin's queryMsg* verbs and their message track). Tables, or ``--json``: a list of
messages, each with its ``tracks``.
"""

from __future__ import annotations

import time
from typing import Any

import click

from pocketmq import admin as admin_lib
from pocketmq.admin import msg_query
from pocketmq.cli.admin import run_admin
from pocketmq.cli.output import emit_json, emit_table, json_option, progress
from pocketmq.protocol.message import MessageExt, create_offset_msg_id

Found = list[tuple[MessageExt, list[msg_query.MessageTrack]]]


def _ms(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def message_fields(msg: MessageExt) -> dict[str, Any]:
    """A message as mqadmin's printMsg lists it (names as MessageExt's getters)."""
    return {
        "topic": msg.topic,
        "msgId": msg.properties.get("UNIQ_KEY", msg.msg_id),
        "offsetMsgId": create_offset_msg_id(msg.store_host, msg.phy_offset),
        "tags": msg.tags or "",
        "keys": msg.keys or "",
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.phy_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": "{}:{}".format(*msg.born_host),
        "storeHost": msg_query.host_addr(msg),
        "sysFlag": msg.sys_flag,
        "properties": dict(sorted(msg.properties.items())),
        "body": msg.body.decode("utf-8", "replace"),
    }


async def _with_tracks(c: admin_lib.AdminClient, msgs: list[MessageExt]) -> Found:
    return [(m, await msg_query.track(c, m)) for m in msgs]


def _emit(found: Found, as_json: bool) -> None:
    if as_json:
        emit_json([
            {**message_fields(m), "tracks": [
                {"group": t.group, "trackType": t.track_type.value, "detail": t.detail}
                for t in tracks
            ]}
            for m, tracks in found
        ])  # fmt: skip
        return
    for msg, tracks in found:
        fields = message_fields(msg)
        for name in ("bornTimestamp", "storeTimestamp"):
            fields[name] = _ms(int(fields[name]))
        emit_table(["field", "value"], list(fields.items()), as_json=False,
                   title=f"message {fields['msgId']}")  # fmt: skip
        emit_table(["group", "trackType", "detail"],
                   [(t.group, t.track_type.value, t.detail) for t in tracks], as_json=False,
                   footer="" if tracks else "no group consumes this topic")  # fmt: skip


@click.command("query-msg-by-id")
@click.option("-i", "--msg-id", "msg_ids", required=True, multiple=True,
              help="Offset message id (offsetMsgId); repeat for several.")  # fmt: skip
@json_option
@click.pass_obj
def query_msg_by_id(namesrv: str, msg_ids: tuple[str, ...], as_json: bool) -> None:
    """Messages by offset message id, with who consumed them."""

    async def go(c: admin_lib.AdminClient) -> Found:
        return await _with_tracks(c, [await msg_query.view_by_offset_id(c, i) for i in msg_ids])

    _emit(run_admin(namesrv, go), as_json)


@click.command("query-msg-by-unique-key")
@click.option("-t", "--topic", required=True)
@click.option("-i", "--msg-id", required=True, help="The producer's message id (UNIQ_KEY).")
@json_option
@click.pass_obj
def query_msg_by_unique_key(namesrv: str, topic: str, msg_id: str, as_json: bool) -> None:
    """A message by the id its producer gave it (every stored copy), with who consumed it."""

    async def go(c: admin_lib.AdminClient) -> Found:
        found = []
        for addr in (await c.topic_masters(topic)).values():
            found += await msg_query.query_on_broker(c, addr, topic, msg_id, unique=True)
        if not found:
            raise admin_lib.AdminError(f"no message of {topic} has the id {msg_id}")
        return await _with_tracks(c, found)

    _emit(run_admin(namesrv, go), as_json)


@click.command("query-msg-by-key")
@click.option("-t", "--topic", required=True)
@click.option("-k", "--key", required=True, help="A message key (KEYS).")
@click.option("--begin", "begin_ms", type=int, default=0, help="From (epoch ms).")
@click.option("--end", "end_ms", type=int, default=msg_query.JAVA_LONG_MAX, help="To (epoch ms).")
@click.option("-c", "--max-num", type=click.IntRange(1, 64), default=32, show_default=True)
@json_option
@click.pass_obj
def query_msg_by_key(
    namesrv: str, topic: str, key: str, begin_ms: int, end_ms: int, max_num: int, as_json: bool
) -> None:
    """Messages with a key, on every broker of the topic, with who consumed them."""

    async def go(c: admin_lib.AdminClient) -> Found:
        masters = await c.topic_masters(topic)
        found = []
        for addr in progress(list(masters.values()), "querying brokers"):
            found += await msg_query.query_on_broker(
                c, addr, topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
            )
        if not found:
            raise admin_lib.AdminError(f"no message of {topic} has the key {key} in that time")
        return await _with_tracks(c, found)

    _emit(run_admin(namesrv, go), as_json)


@click.command("query-msg-by-offset")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", required=True)
@click.option("-i", "--queue-id", type=click.IntRange(0), required=True)
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
@json_option
@click.pass_obj
def query_msg_by_offset(
    namesrv: str, topic: str, broker_name: str, queue_id: int, offset: int, as_json: bool
) -> None:
    """The message at a queue offset, with who consumed it."""

    async def go(c: admin_lib.AdminClient) -> Found:
        msg = await msg_query.query_by_offset(c, topic, broker_name, queue_id, offset)
        return await _with_tracks(c, [msg])

    _emit(run_admin(namesrv, go), as_json)
