"""The message pages' data: search by key, by id (offset message id or the producer's
UNIQ_KEY) and by store time; dead-letter queues and their resend.

A resend puts the dead letter back into its group's retry topic (``%RETRY%group``, with
reconsumeTimes 0 and its original topic in RETRY_TOPIC), so that only the group that gave up
on it consumes it again, with its full retry budget; the dead letter itself stays where it is
(the log is append-only). Pulls use RocketMQ's TOOLS_CONSUMER group and carry their
subscription, as mqadmin's do, and commit nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pocketmq.admin import AdminClient, AdminError
from pocketmq.errors import ProtocolError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import (
    MessageConst,
    MessageExt,
    PullSysFlag,
    create_offset_msg_id,
    decode_offset_msg_id,
)
from pocketmq.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    MASTER_ID,
    TOOLS_CONSUMER_GROUP,
    is_dlq_topic,
    retry_topic,
)
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.pull_body import decode_pull_body

# At most this many messages per search, as RocketMQ Dashboard's pages show.
MAX_RESULTS = 64
_PULL_FOUND = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
               ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Found:
    msg: MessageExt
    offset_msg_id: str  # where it is stored: store host + CommitLog offset
    broker_name: str

    @property
    def uniq_key(self) -> str:
        return self.msg.uniq_key or ""

    def body_text(self) -> str:
        """The body as UTF-8 text, or as hex where it is not text."""
        try:
            return self.msg.body.decode("utf-8")
        except UnicodeDecodeError:
            return "hex: " + self.msg.body.hex()


def _masters(route: dict[str, Any]) -> dict[str, str]:
    """Broker name -> master address of a TopicRouteData."""
    out = {}
    for b in route.get("brokerDatas", []):
        addrs = b.get("brokerAddrs", {})
        addr = addrs.get(str(MASTER_ID)) or addrs.get(MASTER_ID)
        if addr:
            out[str(b["brokerName"])] = str(addr)
    return out


def _decode(body: bytes, broker_name: str, addr: str) -> list[Found]:
    try:
        msgs = decode_pull_body(body, False)
    except (ProtocolError, ValueError) as exc:
        raise AdminError(f"{addr} sent records that do not decode: {exc}") from exc
    return [Found(m, create_offset_msg_id(m.store_host, m.phy_offset), broker_name) for m in msgs]


async def by_key(
    admin: AdminClient, topic: str, key: str, begin_ms: int = 0, end_ms: int | None = None,
    *, unique: bool = False,
) -> list[Found]:  # fmt: skip
    """QUERY_MESSAGE on every master of the topic (``unique``: the key is a UNIQ_KEY)."""
    end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
    out: list[Found] = []
    for name, addr in _masters(await admin.route(topic)).items():
        fields: dict[str, Any] = {"topic": topic, "key": key, "maxNum": MAX_RESULTS,
                                  "beginTimestamp": begin_ms, "endTimestamp": end}  # fmt: skip
        if unique:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        resp = await admin.call(
            addr, RequestCode.QUERY_MESSAGE, fields,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )  # fmt: skip
        if resp.code == ResponseCode.SUCCESS:
            found = _decode(resp.body, name, addr)
            if unique:
                found = [f for f in found if f.uniq_key == key]
            out += found
    return sorted(out, key=lambda f: f.msg.store_timestamp)[:MAX_RESULTS]


async def by_offset_id(admin: AdminClient, msg_id: str) -> Found:
    """VIEW_MESSAGE_BY_ID at the broker the offset message id names."""
    try:
        (host, port), offset = decode_offset_msg_id(msg_id)
    except ProtocolError as exc:
        raise AdminError(str(exc)) from exc
    addr = f"{host}:{port}"
    names = {a: n for n, a in (await admin.cluster_info()).masters().items()}
    resp = await admin.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    found = _decode(resp.body, names.get(addr, addr), addr)
    if not found:
        raise AdminError(f"{addr} has no message at offset {offset}")
    return found[0]


async def by_id(admin: AdminClient, topic: str, msg_id: str) -> list[Found]:
    """A message id as a client shows it: an offset id where it decodes to a broker of the
    cluster, else the producer's UNIQ_KEY."""
    try:
        (host, port), _ = decode_offset_msg_id(msg_id)
        masters = set((await admin.cluster_info()).masters().values())
        if f"{host}:{port}" in masters:
            return [await by_offset_id(admin, msg_id)]
    except ProtocolError:
        pass
    return await by_key(admin, topic, msg_id, unique=True)


async def by_time(admin: AdminClient, topic: str, begin_ms: int, end_ms: int) -> list[Found]:
    """Messages stored in [begin_ms, end_ms] on every queue, first ones first, at most
    MAX_RESULTS in all."""
    route = await admin.route(topic)
    masters = _masters(route)
    out: list[Found] = []
    for q in route.get("queueDatas", []):
        name = str(q["brokerName"])
        addr = masters.get(name)
        if addr is None:
            continue
        for queue_id in range(int(q["readQueueNums"])):
            start = await admin.call(
                addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                {"topic": topic, "queueId": queue_id, "timestamp": begin_ms},
            )  # fmt: skip
            offset = int(start.ext_fields.get("offset", 0))
            for f in await _pull(admin, addr, name, topic, queue_id, offset, MAX_RESULTS):
                if f.msg.store_timestamp > end_ms:
                    break
                if f.msg.store_timestamp >= begin_ms:
                    out.append(f)
    return sorted(out, key=lambda f: f.msg.store_timestamp)[:MAX_RESULTS]


async def _pull(
    admin: AdminClient, addr: str, broker_name: str, topic: str, queue_id: int, offset: int,
    count: int,
) -> list[Found]:  # fmt: skip
    resp = await admin.call(
        addr, RequestCode.PULL_MESSAGE,
        {"consumerGroup": TOOLS_CONSUMER_GROUP, "topic": topic, "queueId": queue_id,
         "queueOffset": offset, "maxMsgNums": count, "sysFlag": PullSysFlag.SUBSCRIPTION,
         "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0},
        ok=_PULL_FOUND,
    )  # fmt: skip
    return _decode(resp.body, broker_name, addr) if resp.code == ResponseCode.SUCCESS else []


@dataclass(frozen=True, slots=True)
class DeadLetters:
    group: str
    count: int
    messages: list[Found]  # the first ones


async def dead_letters(admin: AdminClient, topic_names: list[str]) -> list[DeadLetters]:
    """Every dead-letter topic among ``topic_names``, with its size and first messages."""
    out = []
    for topic in sorted(t for t in topic_names if is_dlq_topic(t)):
        route = await admin.route(topic)
        masters = _masters(route)
        count = 0
        first: list[Found] = []
        for q in route.get("queueDatas", []):
            addr = masters.get(str(q["brokerName"]))
            if addr is None:
                continue
            for queue_id in range(int(q["readQueueNums"])):
                span = [
                    int((await admin.call(addr, code, {"topic": topic, "queueId": queue_id}))
                        .ext_fields.get("offset", 0))
                    for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET)
                ]  # fmt: skip
                count += max(0, span[1] - span[0])
                if len(first) < MAX_RESULTS and span[1] > span[0]:
                    first += await _pull(admin, addr, str(q["brokerName"]), topic, queue_id,
                                         span[0], MAX_RESULTS - len(first))  # fmt: skip
        out.append(DeadLetters(topic[len(DLQ_GROUP_TOPIC_PREFIX) :], count, first))
    return out


async def resend_dead_letter(admin: AdminClient, group: str, offset_msg_id: str) -> str:
    """Puts a dead letter of ``group`` back into the group's retry topic; returns the new
    message's offset id."""
    letter = await by_offset_id(admin, offset_msg_id)
    msg = letter.msg
    if not is_dlq_topic(msg.topic) or msg.topic[len(DLQ_GROUP_TOPIC_PREFIX) :] != group:
        raise AdminError(f"message {offset_msg_id} is not a dead letter of group {group}")
    props = dict(msg.properties)
    original = props.get(MessageConst.RETRY_TOPIC) or props.get(MessageConst.REAL_TOPIC)
    if not original:
        raise AdminError(f"dead letter {offset_msg_id} does not say which topic it came from")
    props[MessageConst.RETRY_TOPIC] = original
    props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, letter.uniq_key or offset_msg_id)
    target = retry_topic(group)
    masters = _masters(await admin.route(target))
    addr = masters.get(letter.broker_name) or next(iter(masters.values()), None)
    if addr is None:
        raise AdminError(f"no master broker serves {target}")
    resp = await admin.call(
        addr, RequestCode.SEND_MESSAGE,
        {"producerGroup": TOOLS_CONSUMER_GROUP, "topic": target, "defaultTopic": target,
         "defaultTopicQueueNums": 1, "queueId": 0, "sysFlag": 0,
         "bornTimestamp": int(time.time() * 1000), "flag": msg.flag,
         "properties": encode_properties(props), "reconsumeTimes": 0},
        msg.body,
    )  # fmt: skip
    return str(resp.ext_fields.get("offsetMsgId") or resp.ext_fields.get("msgId", ""))
