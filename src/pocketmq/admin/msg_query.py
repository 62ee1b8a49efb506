"""Finding a message and who consumed it, as mqadmin's queryMsgById, queryMsgByKey,
queryMsgByUniqueKey and queryMsgByOffset do: VIEW_MESSAGE_BY_ID (33) at the broker an offset
message id names, QUERY_MESSAGE (12, QueryMessageRequestHeader; ``_UNIQUE_KEY_QUERY`` for a
producer's message id) on every master of the topic, a one-message PULL_MESSAGE (11) at an
offset; then DefaultMQAdminExt.messageTrackDetail: the groups consuming the topic
(QUERY_TOPIC_CONSUME_BY_WHO 300), each group's connection (203: offline, or a pull consumer),
and for push consumers whether the group's consume offset in the message's queue on the broker
that stored it is past the message (GET_CONSUME_STATS 208), and whether its tags filter it.

No formatting here.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from pocketmq.admin import connections
from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.admin.messages import pull_messages
from pocketmq.admin.stats import topic_consumer_groups
from pocketmq.errors import ProtocolError, RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageExt, decode_offset_msg_id
from pocketmq.protocol.names import SUB_ALL, retry_topic
from pocketmq.protocol.pull_body import decode_pull_body

# MixAll.UNIQUE_MSG_QUERY_FLAG; MixAll.TOOLS_CONSUMER_GROUP, which mqadmin pulls as.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
JAVA_LONG_MAX = (1 << 63) - 1


class TrackType(enum.Enum):
    """RocketMQ's TrackType."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class MessageTrack:
    """RocketMQ's MessageTrack: a group, what it did with the message, and why when unknown."""

    group: str
    track_type: TrackType
    detail: str = ""


def _messages(addr: str, body: bytes) -> list[MessageExt]:
    try:
        return decode_pull_body(body, False)
    except (ProtocolError, struct.error) as exc:
        raise AdminError(f"{addr} sent messages that do not decode: {exc}") from exc


def host_addr(msg: MessageExt) -> str:
    ip, port = msg.store_host
    return f"{ip}:{port}"


async def view_by_offset_id(client: AdminClient, msg_id: str) -> MessageExt:
    """The message an offset message id (store host + CommitLog offset) names.

    Raises:
        AdminError: not an offset message id, or the broker has no such message.
    """
    try:
        (ip, port), phy_offset = decode_offset_msg_id(msg_id)
    except ProtocolError as exc:
        raise AdminError(f"{msg_id} is not an offset message id: {exc} (a producer's message "
                         "id is looked up with query-msg-by-unique-key)") from exc  # fmt: skip
    addr = f"{ip}:{port}"
    resp = await client.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset})
    found = _messages(addr, resp.body)
    if not found:
        raise AdminError(f"{addr} sent no message for {msg_id}")
    return found[0]


async def query_on_broker(
    client: AdminClient,
    addr: str,
    topic: str,
    key: str,
    *,
    unique: bool = False,
    max_num: int = 32,
    begin_ms: int = 0,
    end_ms: int = JAVA_LONG_MAX,
) -> list[MessageExt]:
    """QUERY_MESSAGE on one broker; [] when it has no match (QUERY_NOT_FOUND)."""
    header: dict[str, object] = {"topic": topic, "key": key, "maxNum": max_num,
                                 "beginTimestamp": begin_ms, "endTimestamp": end_ms}  # fmt: skip
    if unique:
        header[UNIQUE_MSG_QUERY_FLAG] = "true"
    resp = await client.call(addr, RequestCode.QUERY_MESSAGE, header,
                             ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))  # fmt: skip
    if resp.code != ResponseCode.SUCCESS:
        return []
    found = _messages(addr, resp.body)
    if unique:
        return [m for m in found if m.msg_id == key or m.properties.get("UNIQ_KEY") == key]
    return [m for m in found if key in (m.keys or "").split(" ")]


async def query_by_offset(
    client: AdminClient, topic: str, broker_name: str, queue_id: int, offset: int
) -> MessageExt:
    """The message at a queue offset (one PULL_MESSAGE as TOOLS_CONSUMER, committing nothing).

    Raises:
        AdminError: no such broker or message.
    """
    masters = await client.topic_masters(topic)
    addr = masters.get(broker_name)
    if addr is None:
        raise AdminError(f"{broker_name} does not serve {topic} (its brokers: "
                         f"{', '.join(masters)})")  # fmt: skip
    found = await pull_messages(client, addr, topic, queue_id, offset, 1)
    if not found:
        where = f"{topic} {broker_name} queue {queue_id}"
        raise AdminError(f"no message at offset {offset} of {where}")
    return found[0]


async def _consumed(client: AdminClient, msg: MessageExt, group: str) -> bool:
    """DefaultMQAdminExtImpl.consumed: the group's offset in the message's queue, on the
    broker whose master stored it, is past the message."""
    masters = route_masters(await client.route(retry_topic(group)))
    info = await client.cluster_info()
    stored_at = host_addr(msg)
    for addr in masters.values():
        body = await client.call_json(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group})
        try:
            for key, wrapper in body["offsetTable"].items():
                topic, broker_name, queue_id = json_body.parse_message_queue_key(key)
                if topic != msg.topic or queue_id != msg.queue_id:
                    continue
                if info.masters().get(broker_name) == stored_at:
                    return int(wrapper["consumerOffset"]) > msg.queue_offset
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdminError(f"{addr} sent bad consume stats: {exc!r}") from exc
    return False


async def consuming_groups(client: AdminClient, topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO on the masters of the topic."""
    masters = list((await client.topic_masters(topic)).values())
    return await topic_consumer_groups(client, topic, masters)


async def track(client: AdminClient, msg: MessageExt) -> list[MessageTrack]:
    """What each group consuming the message's topic did with it."""
    out = []
    for group in await consuming_groups(client, msg.topic):
        try:
            cc = await connections.consumer_connection(client, group)
        except AdminError as exc:
            kind = TrackType.NOT_ONLINE if "not online" in str(exc) else TrackType.UNKNOWN
            out.append(MessageTrack(group, kind, str(exc)))
            continue
        if cc.consume_type == "CONSUME_ACTIVELY":
            out.append(MessageTrack(group, TrackType.PULL))
            continue
        if cc.consume_type != "CONSUME_PASSIVELY":
            out.append(MessageTrack(group, TrackType.UNKNOWN, f"consumeType {cc.consume_type}"))
            continue
        try:
            consumed = await _consumed(client, msg, group)
        except AdminError as exc:
            out.append(MessageTrack(group, TrackType.UNKNOWN, str(exc)))
            continue
        kind = TrackType.NOT_CONSUME_YET
        if consumed:
            kind = TrackType.CONSUMED
            sub = cc.subscriptions.get(msg.topic)
            if sub is not None and filtered_by_tags(sub.get("tagsSet"), msg.tags):
                kind = TrackType.CONSUMED_BUT_FILTERED
        out.append(MessageTrack(group, kind))
    return out


def filtered_by_tags(tags_set: object, tags: str | None) -> bool:
    """The subscription's tagsSet leaves the message's tag out (an empty set, as a SQL92
    subscription has, or "*" takes every tag)."""
    if not isinstance(tags_set, list) or not tags_set or SUB_ALL in tags_set:
        return False
    return tags not in tags_set
