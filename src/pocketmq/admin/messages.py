"""Messages: send one test message (mqadmin sendMessage), read messages from the start of
a topic's queues (mqadmin consumeMessage) or stored within a time span, without committing an
offset; dead-letter queues and the resend of a dead letter.

A resend puts the dead letter back into its group's retry topic (``%RETRY%group``, with
reconsumeTimes 0 and its original topic in RETRY_TOPIC), so that only the group that gave up
on it consumes it again, with its full retry budget; the dead letter itself stays where it is
(the log is append-only).

Reading behaves as a pull consumer: first a HEART_BEAT that registers the tools group
(``TOOLS_CONSUMER``, as mqadmin's) with a subscription to the topic, on the connection the
pulls then use, so a broker that refuses pulls of a group it has no subscription for
(SUBSCRIPTION_NOT_EXIST, RocketMQ 5's rejectPullConsumerEnable) serves them; the group is
unregistered at the end.

No formatting here; functions take an AdminClient and return parsed values.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError, route_masters, route_read_queues
from pocketmq.errors import ProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, PullSysFlag
from pocketmq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    DLQ_GROUP_TOPIC_PREFIX,
    EXPRESSION_TYPE_TAG,
    MASTER_ID,
    TOOLS_CONSUMER_GROUP,
    TagExpressionError,
    is_dlq_topic,
    parse_tag_expression,
    retry_topic,
)
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message

ADMIN_PRODUCER_GROUP = "PMQ_ADMIN"
_PULL_ANSWERS = (
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)


@dataclass(frozen=True, slots=True)
class SendResult:
    broker_addr: str
    queue_id: int
    queue_offset: int
    msg_id: str  # the client's unique key (SendResult.msgId)
    offset_msg_id: str  # the broker's id of the stored message (SendResult.offsetMsgId)


async def send_message(
    client: AdminClient, topic: str, body: bytes, tags: str | None = None, keys: str | None = None
) -> SendResult:
    """SEND_MESSAGE to the first master of the topic's route (of the auto-create topic's
    when the topic has none: the broker creates it where it allows that)."""
    try:
        route = await client.route(topic)
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        route = await client.route(AUTO_CREATE_TOPIC_KEY)
    addr = next(iter(route_masters(route).values()), None)
    if addr is None:
        raise AdminError(f"no master broker serves topic {topic}")
    props = {k: v for k, v in ((MessageConst.TAGS, tags), (MessageConst.KEYS, keys)) if v}
    uniq_key = props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"{time.time_ns():032X}"
    now_ms = time.time_ns() // 1_000_000
    header = {
        "producerGroup": ADMIN_PRODUCER_GROUP,
        "topic": topic,
        "defaultTopic": AUTO_CREATE_TOPIC_KEY,
        "defaultTopicQueueNums": 4,
        "queueId": -1,
        "sysFlag": 0,
        "bornTimestamp": now_ms,
        "flag": 0,
        "properties": encode_properties(props),
        "reconsumeTimes": 0,
    }
    sent = await client.call(addr, RequestCode.SEND_MESSAGE, header, body)
    f = sent.ext_fields
    try:
        return SendResult(addr, int(f["queueId"]), int(f["queueOffset"]), uniq_key, str(f["msgId"]))
    except (KeyError, ValueError) as exc:
        raise AdminError(f"{addr} sent a bad send result: {exc!r}") from exc


def _heartbeat(client_id: str, topic: str, expression: str) -> bytes:
    tags = parse_tag_expression(expression)
    sub = {
        "classFilterMode": False,
        "topic": topic,
        "subString": tags.expression,
        "tagsSet": sorted(tags.tags),
        "codeSet": sorted(tags.codes),
        "subVersion": time.time_ns() // 1_000_000,
        "expressionType": EXPRESSION_TYPE_TAG,
    }
    consumer = {
        "groupName": TOOLS_CONSUMER_GROUP,
        "consumeType": "CONSUME_ACTIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "subscriptionDataSet": [sub],
        "unitMode": False,
    }
    return json_body.dumps(
        {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [consumer]}
    )


def _decode_all(body: bytes, limit: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    pos = 0
    while pos < len(body) and len(out) < limit:
        size = struct.unpack_from(">i", body, pos)[0]
        out.append(decode_message(body[pos : pos + size]))
        pos += size
    return out


async def consume_messages(
    client: AdminClient, topic: str, count: int, expression: str = "*"
) -> list[tuple[str, MessageExt]]:
    """Up to count messages of topic matching a tag expression, read from offset 0 of each
    queue, in route order (commits no offset), each with its broker name."""
    try:
        tags = parse_tag_expression(expression)
    except TagExpressionError as exc:
        raise AdminError(f"bad tag expression {expression!r}: {exc}") from exc
    route = await client.route(topic)
    addrs = {b["brokerName"]: b["brokerAddrs"].get(str(MASTER_ID)) for b in route["brokerDatas"]}
    client_id = f"{socket.gethostname()}@{os.getpid()}#admin"
    heartbeat = _heartbeat(client_id, topic, tags.expression)
    registered: list[str] = []
    out: list[tuple[str, MessageExt]] = []
    try:
        for q in route["queueDatas"]:
            addr = addrs.get(q["brokerName"])
            if addr is None:
                continue
            if addr not in registered:
                await client.call(addr, RequestCode.HEART_BEAT, {}, heartbeat)
                registered.append(addr)
            for qid in range(int(q["readQueueNums"])):
                if len(out) >= count:
                    return out
                got = await pull_messages(
                    client, addr, topic, qid, 0, count - len(out), tags.expression
                )
                out += [(str(q["brokerName"]), m) for m in got]
        return out
    finally:
        for addr in registered:
            await _unregister(client, addr, client_id)


async def pull_messages(
    client: AdminClient,
    addr: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    expression: str = "*",
) -> list[MessageExt]:
    """One PULL_MESSAGE as mqadmin's TOOLS_CONSUMER group, carrying its subscription and
    committing nothing: up to max_nums messages from offset ([] where there are none)."""
    header: dict[str, Any] = {
        "consumerGroup": TOOLS_CONSUMER_GROUP,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": max_nums,
        "sysFlag": PullSysFlag.SUBSCRIPTION,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": expression,
        "subVersion": 0,
        "expressionType": EXPRESSION_TYPE_TAG,
    }
    resp = await client.call(addr, RequestCode.PULL_MESSAGE, header, ok=_PULL_ANSWERS)
    try:
        return _decode_all(resp.body, max_nums)
    except (ProtocolError, struct.error) as exc:
        raise AdminError(f"{addr} sent a bad pull body for {topic} queue {queue_id}") from exc


async def _unregister(client: AdminClient, addr: str, client_id: str) -> None:
    fields = {"clientID": client_id, "consumerGroup": TOOLS_CONSUMER_GROUP}
    # The broker drops the group with the connection anyway when the command exits.
    with contextlib.suppress(AdminError):
        await client.call(addr, RequestCode.UNREGISTER_CLIENT, fields)


ReadQueue = tuple[str, str, int]  # broker name, master address, queue id


async def messages_by_time(
    client: AdminClient, topic: str, begin_ms: int, end_ms: int, limit: int,
    progress: Callable[[list[ReadQueue]], Iterable[ReadQueue]] = lambda queues: queues,
) -> list[tuple[str, MessageExt]]:  # fmt: skip
    """Messages stored in [begin_ms, end_ms] on every queue of topic (each with its broker
    name), the earliest first, at most ``limit`` in all: each queue is read from the offset
    SEARCH_OFFSET_BY_TIMESTAMP gives for begin_ms until a message is stored after end_ms
    (mqadmin printMsg). progress wraps the list of queues, for a progress bar."""
    found: list[tuple[str, MessageExt]] = []
    for name, addr, queue_id in progress(route_read_queues(await client.route(topic))):
        start = await client.call(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": queue_id, "timestamp": begin_ms},
        )  # fmt: skip
        offset = int(start.ext_fields.get("offset", 0))
        kept = 0
        while kept < limit:
            got = await pull_messages(client, addr, topic, queue_id, offset, limit - kept)
            past_end = [m for m in got if m.store_timestamp > end_ms]
            inside = [m for m in got if begin_ms <= m.store_timestamp <= end_ms]
            found += [(name, m) for m in inside]
            kept += len(inside)
            if not got or past_end:
                break
            offset = got[-1].queue_offset + 1
    found.sort(key=lambda nm: nm[1].store_timestamp)
    return found[:limit]


@dataclass(frozen=True, slots=True)
class DeadLetters:
    group: str
    count: int
    first: list[tuple[str, MessageExt]]  # (broker name, message), the first ones


async def dead_letters(client: AdminClient, topics: list[str], limit: int) -> list[DeadLetters]:
    """Every dead-letter topic among ``topics``: how many messages it holds, and its first
    ``limit`` messages."""
    out = []
    for topic in sorted(t for t in topics if is_dlq_topic(t)):
        count = 0
        first: list[tuple[str, MessageExt]] = []
        for name, addr, queue_id in route_read_queues(await client.route(topic)):
            lo, hi = [
                int((await client.call(addr, code, {"topic": topic, "queueId": queue_id}))
                    .ext_fields.get("offset", 0))
                for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET)
            ]  # fmt: skip
            count += max(0, hi - lo)
            if len(first) < limit and hi > lo:
                got = await pull_messages(client, addr, topic, queue_id, lo, limit - len(first))
                first += [(name, m) for m in got]
        out.append(DeadLetters(topic[len(DLQ_GROUP_TOPIC_PREFIX) :], count, first))
    return out


async def resend_dead_letter(
    client: AdminClient, group: str, letter: MessageExt, broker_name: str
) -> str:
    """Puts a dead letter of ``group`` back into the group's retry topic, on the broker that
    held it where that broker serves the retry topic; returns the new message's offset id."""
    if not is_dlq_topic(letter.topic) or letter.topic[len(DLQ_GROUP_TOPIC_PREFIX) :] != group:
        raise AdminError(f"the message is in {letter.topic}, not a dead letter of group {group}")
    props = dict(letter.properties)
    original = props.get(MessageConst.RETRY_TOPIC) or props.get(MessageConst.REAL_TOPIC)
    if not original:
        raise AdminError("the dead letter does not say which topic it came from (RETRY_TOPIC)")
    props[MessageConst.RETRY_TOPIC] = original
    props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, letter.uniq_key or letter.msg_id)
    target = retry_topic(group)
    masters = route_masters(await client.route(target))
    addr = masters.get(broker_name) or next(iter(masters.values()), None)
    if addr is None:
        raise AdminError(f"no master broker serves {target}")
    header = {
        "producerGroup": TOOLS_CONSUMER_GROUP, "topic": target, "defaultTopic": target,
        "defaultTopicQueueNums": 1, "queueId": 0, "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000), "flag": letter.flag,
        "properties": encode_properties(props), "reconsumeTimes": 0,
    }  # fmt: skip
    resp = await client.call(addr, RequestCode.SEND_MESSAGE, header, letter.body)
    return str(resp.ext_fields.get("offsetMsgId") or resp.ext_fields.get("msgId", ""))
