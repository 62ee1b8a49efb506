"""A send request's header (SendMessageRequestHeader, and its V2 form with one-letter names),
read and checked in one call. No I/O here.

Every single send parses this header, so it is one call, native in ``pocketmq._speedups``
(``send_header``) with ``send_header_py`` the reference; the rules are protocol.fields' (each
field read as its getter reads it), in the order RocketMQ decodes a header, before anything is
looked up for it. What the broker does with the values (the topic's existence and queues, the
properties) is the send handler's.
"""

from __future__ import annotations

from typing import Final

from pocketmq.protocol import fields
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import ANY_QUEUE
from pocketmq.protocol.headers import get_bool, get_str
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY
from pocketmq.protocol.native import select
from pocketmq.protocol.remoting import RemotingCommand

# SendMessageRequestHeaderV2's one-letter names of SendMessageRequestHeader's fields.
V2_NAMES: Final = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
    "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
    "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch",
    "n": "brokerName",
}  # fmt: skip

# (topic, defaultTopic, defaultTopicQueueNums, queueId (ANY_QUEUE: the broker picks),
#  flag, properties text, sysFlag, bornTimestamp, reconsumeTimes,
#  maxReconsumeTimes (-1: not sent), batch)
SendHeader = tuple[str, str, int, int, int, str, int, int, int, int, bool]


def v1_fields(ext_fields: dict[str, str]) -> dict[str, str]:
    """A V2 header's fields under their V1 names (other keys as they are)."""
    return {V2_NAMES.get(k, k): v for k, v in ext_fields.items()}


def send_header_py(ext_fields: dict[str, str], v2: bool, default_queue_nums: int) -> SendHeader:
    """The fields of a send's header; ``v2``: one-letter names (SEND_MESSAGE_V2, and
    SEND_BATCH_MESSAGE from Java clients); ``default_queue_nums`` when the producer names none.

    Raises:
        RequestError: a field RocketMQ cannot decode (SYSTEM_ERROR), an invalid topic name
            (SYSTEM_ERROR, as msgCheck answers a send) or a field outside its domain.
    """
    cmd = RemotingCommand(code=0, ext_fields=v1_fields(ext_fields) if v2 else ext_fields)
    return (
        fields.topic(cmd, code=ResponseCode.SYSTEM_ERROR),
        get_str(cmd, "defaultTopic", AUTO_CREATE_TOPIC_KEY),
        fields.queue_nums(cmd, "defaultTopicQueueNums", default_queue_nums),
        fields.queue_id(cmd, allow_any=True, default=ANY_QUEUE),
        fields.java_int(cmd, "flag", 0),
        get_str(cmd, "properties", ""),
        fields.java_int(cmd, "sysFlag", 0),
        fields.timestamp_ms(cmd, "bornTimestamp", 0),
        fields.java_int(cmd, "reconsumeTimes", 0),
        fields.java_int(cmd, "maxReconsumeTimes", -1),
        get_bool(cmd, "batch"),
    )


send_header = select("send_header", send_header_py)
