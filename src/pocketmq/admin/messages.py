"""Messages: send one test message (mqadmin sendMessage) and read messages from the start of
a topic's queues without committing an offset (mqadmin consumeMessage).

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
from dataclasses import dataclass
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError
from pocketmq.errors import ProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, PullSysFlag
from pocketmq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    EXPRESSION_TYPE_TAG,
    MASTER_ID,
    TagExpressionError,
    parse_tag_expression,
)
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message

# MixAll.TOOLS_CONSUMER_GROUP: the group mqadmin's consumeMessage pulls as.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
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
    masters = [b["brokerAddrs"].get(str(MASTER_ID)) for b in route.get("brokerDatas", [])]
    addr = next((a for a in masters if a), None)
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
                got = await _pull(client, addr, topic, qid, count - len(out), tags.expression)
                out += [(str(q["brokerName"]), m) for m in got]
        return out
    finally:
        for addr in registered:
            await _unregister(client, addr, client_id)


async def _pull(
    client: AdminClient, addr: str, topic: str, queue_id: int, max_nums: int, expression: str
) -> list[MessageExt]:
    header: dict[str, Any] = {
        "consumerGroup": TOOLS_CONSUMER_GROUP,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": 0,
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
