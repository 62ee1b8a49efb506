"""``pocketmq admin send-message`` and ``consume-message``: one test message in, the first
messages of a topic out (the tools group registers as a pull consumer first, so a broker that
refuses unregistered pulls serves it too; no offset is committed).
"""

from __future__ import annotations

import click

from pocketmq.admin import messages
from pocketmq.cli.admin import run_admin
from pocketmq.cli.options import parse_epoch_ms
from pocketmq.cli.output import emit_table, json_option, progress
from pocketmq.protocol.message import MessageConst, MessageExt


@click.command("send-message")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="Message body (UTF-8).")
@click.option("--tags", default=None)
@click.option("-k", "--keys", default=None)
@json_option
@click.pass_obj
def send_message(
    namesrv: str, topic: str, body: str, tags: str | None, keys: str | None, as_json: bool
) -> None:
    """Send one test message (the topic is auto-created where the broker allows it)."""
    sent = run_admin(namesrv, lambda c: messages.send_message(c, topic, body.encode(), tags, keys))
    row = (sent.broker_addr, topic, sent.queue_id, sent.queue_offset, sent.msg_id,
           sent.offset_msg_id)  # fmt: skip
    columns = ["broker", "topic", "queue", "offset", "msgId", "offsetMsgId"]
    emit_table(columns, [row], as_json=as_json)


@click.command("consume-message")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--count", default=10, show_default=True, type=click.IntRange(1))
@click.option("--tags", default="*", show_default=True, help='Tag expression, e.g. "A || B".')
@json_option
@click.pass_obj
def consume_message(namesrv: str, topic: str, count: int, tags: str, as_json: bool) -> None:
    """Print up to COUNT messages from the start of each queue (commits no offset)."""
    found = run_admin(namesrv, lambda c: messages.consume_messages(c, topic, count, tags))
    _emit_messages(found, as_json)


def _emit_messages(found: list[tuple[str, MessageExt]], as_json: bool) -> None:
    rows = [
        (broker, m.queue_id, m.queue_offset, m.tags or "", m.keys or "",
         m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, m.msg_id),
         m.body.decode("utf-8", "replace"))
        for broker, m in found
    ]  # fmt: skip
    columns = ["broker", "queue", "offset", "tags", "keys", "msgId", "body"]
    emit_table(columns, rows, as_json=as_json)


@click.command("print-msg")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--begin", default="0", show_default=True,
              help="Stored at or after: epoch milliseconds, or 'now'.")  # fmt: skip
@click.option("-e", "--end", default="now", show_default=True,
              help="Stored at or before: epoch milliseconds, or 'now'.")  # fmt: skip
@click.option("-n", "--max", "limit", default=1000, show_default=True, type=click.IntRange(1))
@json_option
@click.pass_obj
def print_msg(namesrv: str, topic: str, begin: str, end: str, limit: int, as_json: bool) -> None:
    """Messages of a topic stored between two times, from every queue, earliest first
    (mqadmin printMsg; commits no offset)."""
    begin_ms, end_ms = parse_epoch_ms(begin, "-b"), parse_epoch_ms(end, "-e")
    found = run_admin(
        namesrv,
        lambda c: messages.messages_by_time(
            c, topic, begin_ms, end_ms, limit,
            progress=lambda queues: progress(queues, f"reading {len(queues)} queues of {topic}"),
        ),
    )  # fmt: skip
    _emit_messages(found, as_json)
