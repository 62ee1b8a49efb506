"""Request field validators: every kind at and just past its limits, with RocketMQ's codes,
through the value checks and the remoting header getters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.errors import RequestError
from pocketmq.protocol import fields
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import (
    ANY_QUEUE,
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    MAX_BATCH_SIZE,
    MAX_LONG_POLLING_MS,
    MAX_QUEUE_NUMS,
    MAX_TIMESTAMP_MS,
    FieldError,
    FieldKind,
)
from pocketmq.protocol.remoting import RemotingCommand

INVALID = ResponseCode.INVALID_PARAMETER
SYSTEM = ResponseCode.SYSTEM_ERROR

# (validator, value, expected result); the result is what the validator returns.
ACCEPTED: list[tuple[Callable[[Any], Any], Any, Any]] = [
    (lambda v: fields.check_java_int(v, "flag"), JAVA_INT_MIN, JAVA_INT_MIN),
    (lambda v: fields.check_java_int(v, "flag"), JAVA_INT_MAX, JAVA_INT_MAX),
    (lambda v: fields.check_java_long(v, "x"), JAVA_LONG_MIN, JAVA_LONG_MIN),
    (lambda v: fields.check_java_long(v, "x"), JAVA_LONG_MAX, JAVA_LONG_MAX),
    (fields.check_queue_nums, 1, 1),
    (fields.check_queue_nums, MAX_QUEUE_NUMS, MAX_QUEUE_NUMS),
    (fields.check_perm, 0, 0),
    (fields.check_perm, 7, 7),
    (lambda v: fields.check_queue_id(v, 4), 0, 0),
    (lambda v: fields.check_queue_id(v, 4), 3, 3),
    (lambda v: fields.check_queue_id(v), JAVA_INT_MAX, JAVA_INT_MAX),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), -1, ANY_QUEUE),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), JAVA_INT_MIN, ANY_QUEUE),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), 3, 3),
    (fields.check_offset, 0, 0),
    (fields.check_offset, JAVA_LONG_MAX, JAVA_LONG_MAX),
    (lambda v: fields.check_offset(v, allow_none=True), -5, -1),
    (lambda v: fields.check_offset(v, allow_none=True), JAVA_LONG_MIN, -1),
    (fields.check_long_polling_ms, 0, 0),
    (fields.check_long_polling_ms, MAX_LONG_POLLING_MS, MAX_LONG_POLLING_MS),
    (fields.check_long_polling_ms, MAX_LONG_POLLING_MS + 1, MAX_LONG_POLLING_MS),
    (fields.check_long_polling_ms, JAVA_LONG_MAX, MAX_LONG_POLLING_MS),
    (fields.check_long_polling_ms, -1, 0),
    (fields.check_long_polling_ms, JAVA_LONG_MIN, 0),
    (lambda v: fields.check_invisible_ms(v, 10, 100), 10, 10),
    (lambda v: fields.check_invisible_ms(v, 10, 100), 100, 100),
    (fields.check_batch_size, 1, 1),
    (fields.check_batch_size, MAX_BATCH_SIZE, MAX_BATCH_SIZE),
    (lambda v: fields.check_batch_size(v, limit=32), 32, 32),
    (lambda v: fields.check_body_size(v, 100), 0, 0),
    (lambda v: fields.check_body_size(v, 100), 100, 100),
    (fields.check_timestamp_ms, 0, 0),
    (fields.check_timestamp_ms, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS),
    (fields.check_topic, "T" * 127, "T" * 127),
    (fields.check_topic, "%RETRY%" + "G" * 248, "%RETRY%" + "G" * 248),
    (fields.check_topic, "a-b_c|d%e", "a-b_c|d%e"),
    (fields.check_group, "G" * 255, "G" * 255),
]

# (validator, value, code, kind, words the remark must contain)
REFUSED: list[tuple[Callable[[Any], Any], Any, int, FieldKind, str]] = [
    (lambda v: fields.check_java_int(v, "flag"), JAVA_INT_MAX + 1, SYSTEM, FieldKind.NUMBER,
     "flag=2147483648 is illegal: a Java int must be -2147483648..2147483647"),
    (lambda v: fields.check_java_int(v, "flag"), JAVA_INT_MIN - 1, SYSTEM, FieldKind.NUMBER,
     "flag="),
    (lambda v: fields.check_java_long(v, "x"), JAVA_LONG_MAX + 1, SYSTEM, FieldKind.NUMBER,
     "a Java long"),
    (lambda v: fields.check_java_long(v, "x"), JAVA_LONG_MIN - 1, SYSTEM, FieldKind.NUMBER,
     "a Java long"),
    (fields.check_queue_nums, 0, INVALID, FieldKind.QUEUE_NUMS, "must be 1..1024"),
    (fields.check_queue_nums, -1, INVALID, FieldKind.QUEUE_NUMS, "queueNums=-1"),
    (fields.check_queue_nums, MAX_QUEUE_NUMS + 1, INVALID, FieldKind.QUEUE_NUMS, "1..1024"),
    (fields.check_queue_nums, 10**20, INVALID, FieldKind.QUEUE_NUMS, "1..1024"),
    (fields.check_perm, 8, ResponseCode.NO_PERMISSION, FieldKind.PERMISSION,
     "topicPermission value: 8 is invalid"),
    (fields.check_perm, -1, ResponseCode.NO_PERMISSION, FieldKind.PERMISSION, "0..7"),
    (fields.check_perm, 10**20, ResponseCode.NO_PERMISSION, FieldKind.PERMISSION, "0..7"),
    (lambda v: fields.check_queue_id(v, 4, topic="T"), 4, INVALID, FieldKind.QUEUE_ID,
     "queueId[4] is illegal: queue ids of topic[T] are 0..3 (the topic has 4 queues)"),
    (lambda v: fields.check_queue_id(v, 4), -1, INVALID, FieldKind.QUEUE_ID, "0..3"),
    (lambda v: fields.check_queue_id(v), -1, INVALID, FieldKind.QUEUE_ID, "0..2147483647"),
    (lambda v: fields.check_queue_id(v), JAVA_INT_MAX + 1, INVALID, FieldKind.QUEUE_ID, "0.."),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), 4, INVALID, FieldKind.QUEUE_ID,
     "or negative to let the broker choose"),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), JAVA_INT_MIN - 1, INVALID,
     FieldKind.QUEUE_ID, "0..3"),
    (lambda v: fields.check_queue_id(v, 4, allow_any=True), 10**20, INVALID, FieldKind.QUEUE_ID,
     "0..3"),
    (fields.check_offset, -1, INVALID, FieldKind.OFFSET, "offset=-1 is illegal: an offset"),
    (fields.check_offset, -5, INVALID, FieldKind.OFFSET, "0..9223372036854775807"),
    (fields.check_offset, JAVA_LONG_MAX + 1, INVALID, FieldKind.OFFSET, "an offset"),
    (fields.check_offset, 10**20, INVALID, FieldKind.OFFSET, "an offset"),
    (lambda v: fields.check_offset(v, allow_none=True), 10**20, INVALID, FieldKind.OFFSET,
     "an offset"),
    (lambda v: fields.check_offset(v, allow_none=True), JAVA_LONG_MIN - 1, INVALID,
     FieldKind.OFFSET, "an offset"),
    (fields.check_long_polling_ms, 10**20, SYSTEM, FieldKind.NUMBER, "a Java long"),
    (fields.check_long_polling_ms, JAVA_LONG_MIN - 1, SYSTEM, FieldKind.NUMBER, "a Java long"),
    (lambda v: fields.check_invisible_ms(v, 10, 100), 9, INVALID, FieldKind.INVISIBLE_TIME,
     "must be 10..100"),
    (lambda v: fields.check_invisible_ms(v, 10, 100), 101, INVALID, FieldKind.INVISIBLE_TIME,
     "10..100"),
    (fields.check_batch_size, 0, INVALID, FieldKind.BATCH_SIZE, "maxMsgNums=0"),
    (fields.check_batch_size, -1, INVALID, FieldKind.BATCH_SIZE, "1..1024"),
    (fields.check_batch_size, MAX_BATCH_SIZE + 1, INVALID, FieldKind.BATCH_SIZE, "1..1024"),
    (fields.check_batch_size, 10**9, INVALID, FieldKind.BATCH_SIZE, "1..1024"),
    (lambda v: fields.check_batch_size(v, limit=32), 33, INVALID, FieldKind.BATCH_SIZE, "1..32"),
    (lambda v: fields.check_body_size(v, 100), 101, ResponseCode.MESSAGE_ILLEGAL,
     FieldKind.BODY_SIZE, "101 bytes, over the maximum of 100"),
    (lambda v: fields.check_body_size(v, 100, allow_empty=False), 0, ResponseCode.MESSAGE_ILLEGAL,
     FieldKind.BODY_EMPTY, "empty"),
    (fields.check_timestamp_ms, -1, INVALID, FieldKind.TIMESTAMP, "epoch milliseconds"),
    (fields.check_timestamp_ms, MAX_TIMESTAMP_MS + 1, INVALID, FieldKind.TIMESTAMP, "0..2534"),
    (fields.check_timestamp_ms, JAVA_LONG_MAX, INVALID, FieldKind.TIMESTAMP, "epoch"),
    (fields.check_topic, "", INVALID, FieldKind.TOPIC, "blank"),
    (fields.check_topic, "   ", INVALID, FieldKind.TOPIC, "blank"),
    (fields.check_topic, "T" * 128, INVALID, FieldKind.TOPIC, "max length 127"),
    (fields.check_topic, "%DLQ%" + "G" * 251, INVALID, FieldKind.TOPIC, "max length 255"),
    (fields.check_topic, "a b", INVALID, FieldKind.TOPIC, "illegal characters"),
    (fields.check_topic, "T\n", INVALID, FieldKind.TOPIC, "illegal characters"),
    (fields.check_topic, "../etc", INVALID, FieldKind.TOPIC, "illegal characters"),
    (fields.check_topic, "Tö", INVALID, FieldKind.TOPIC, "illegal characters"),
    (lambda v: fields.check_topic(v, ResponseCode.SYSTEM_ERROR), "", SYSTEM, FieldKind.TOPIC,
     "blank"),
    (fields.check_group, "", INVALID, FieldKind.GROUP, "blank"),
    (fields.check_group, "G" * 256, INVALID, FieldKind.GROUP, "max length 255"),
    (fields.check_group, "G\n", INVALID, FieldKind.GROUP, "illegal characters"),
]  # fmt: skip


@pytest.mark.parametrize(("check", "value", "expected"), ACCEPTED)
def test_accepted_at_the_limits(check: Callable[[Any], Any], value: Any, expected: Any) -> None:
    assert check(value) == expected


@pytest.mark.parametrize(("check", "value", "code", "kind", "remark"), REFUSED)
def test_refused_past_the_limits(
    check: Callable[[Any], Any], value: Any, code: int, kind: FieldKind, remark: str
) -> None:
    with pytest.raises(FieldError) as info:
        check(value)
    assert (info.value.code, info.value.kind) == (code, kind)
    assert remark in info.value.remark
    assert isinstance(info.value, RequestError)  # every edge already answers these


def cmd(**ext: str) -> RemotingCommand:
    return RemotingCommand(code=17, ext_fields=ext)


# (getter, ext fields, expected result or (code, remark part) when refused)
GETTERS: list[tuple[Callable[[RemotingCommand], Any], dict[str, str], Any]] = [
    (lambda c: fields.java_int(c, "flag"), {"flag": "7"}, 7),
    (lambda c: fields.java_int(c, "flag", 0), {}, 0),
    (lambda c: fields.java_int(c, "flag"), {}, (SYSTEM, "the custom field <flag> is null")),
    (lambda c: fields.java_int(c, "flag"), {"flag": "x"}, (SYSTEM, "is not a number")),
    (lambda c: fields.java_int(c, "flag"), {"flag": "inf"}, (SYSTEM, "is not a number")),
    (lambda c: fields.java_int(c, "flag"), {"flag": "1e400"}, (SYSTEM, "is not a number")),
    (lambda c: fields.java_int(c, "flag"), {"flag": str(2**31)}, (SYSTEM, "a Java int")),
    (lambda c: fields.java_long(c, "t"), {"t": str(2**63 - 1)}, 2**63 - 1),
    (lambda c: fields.java_long(c, "t"), {"t": str(10**20)}, (SYSTEM, "a Java long")),
    (lambda c: fields.queue_nums(c, "readQueueNums", 8), {}, 8),
    (lambda c: fields.queue_nums(c, "readQueueNums", 8), {"readQueueNums": "16"}, 16),
    (lambda c: fields.queue_nums(c, "readQueueNums"), {"readQueueNums": "0"},
     (INVALID, "readQueueNums=0 is illegal")),
    (lambda c: fields.queue_nums(c, "writeQueueNums"), {"writeQueueNums": "-1"},
     (INVALID, "writeQueueNums=-1")),
    # Past a Java int, RocketMQ's header decoding already fails.
    (lambda c: fields.queue_nums(c, "readQueueNums"), {"readQueueNums": str(10**20)},
     (SYSTEM, "a Java int")),
    (lambda c: fields.perm(c, default=6), {}, 6),
    (lambda c: fields.perm(c), {"perm": "8"}, (ResponseCode.NO_PERMISSION, "perm must be 0..7")),
    (lambda c: fields.perm(c), {"perm": str(10**20)}, (SYSTEM, "a Java int")),
    (lambda c: fields.queue_id(c, 4, topic="T"), {"queueId": "3"}, 3),
    (lambda c: fields.queue_id(c, 4, topic="T"), {"queueId": "4"}, (INVALID, "topic[T]")),
    (lambda c: fields.queue_id(c, 4, allow_any=True, default=-1), {}, ANY_QUEUE),
    (lambda c: fields.queue_id(c, 4, allow_any=True), {"queueId": str(10**20)},
     (SYSTEM, "a Java int")),
    (lambda c: fields.offset(c, "queueOffset"), {"queueOffset": "-1"},
     (INVALID, "queueOffset=-1 is illegal")),
    (lambda c: fields.offset(c, "commitOffset", -1, allow_none=True), {}, -1),
    (lambda c: fields.offset(c, "commitOffset"), {"commitOffset": str(10**20)},
     (SYSTEM, "a Java long")),
    (lambda c: fields.long_polling_ms(c), {}, 0),
    (lambda c: fields.long_polling_ms(c), {"suspendTimeoutMillis": "15000"}, 15000),
    (lambda c: fields.long_polling_ms(c), {"suspendTimeoutMillis": str(2**62)},
     MAX_LONG_POLLING_MS),
    (lambda c: fields.long_polling_ms(c), {"suspendTimeoutMillis": str(10**20)},
     (SYSTEM, "a Java long")),
    (lambda c: fields.batch_size(c, default=32), {}, 32),
    (lambda c: fields.batch_size(c), {"maxMsgNums": "0"}, (INVALID, "maxMsgNums=0")),
    (lambda c: fields.batch_size(c), {"maxMsgNums": str(10**9)}, (INVALID, "1..1024")),
    (lambda c: fields.timestamp_ms(c, "bornTimestamp"), {"bornTimestamp": "1700000000000"},
     1700000000000),
    (lambda c: fields.timestamp_ms(c, "bornTimestamp"), {"bornTimestamp": str(2**62)},
     (INVALID, "bornTimestamp=")),
    (lambda c: fields.topic(c), {"topic": "T"}, "T"),
    (lambda c: fields.topic(c), {}, (SYSTEM, "the custom field <topic> is null")),
    (lambda c: fields.topic(c), {"topic": "T" * 300}, (INVALID, "max length 127")),
    (lambda c: fields.group(c), {"consumerGroup": "G"}, "G"),
    (lambda c: fields.group(c, "group"), {"group": "a/b"}, (INVALID, "illegal characters")),
]  # fmt: skip


@pytest.mark.parametrize(("getter", "ext", "expected"), GETTERS)
def test_header_getters(
    getter: Callable[[RemotingCommand], Any], ext: dict[str, str], expected: Any
) -> None:
    if isinstance(expected, tuple):
        code, remark = expected
        with pytest.raises(RequestError) as info:
            getter(cmd(**ext))
        assert info.value.code == code
        assert remark in info.value.remark
    else:
        assert getter(cmd(**ext)) == expected
