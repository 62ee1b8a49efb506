"""Inputs for the edge fuzzers: remoting frames, remoting requests and v2 gRPC requests, biased
towards the names the broker knows and the limits of every field.

Each generator takes a ``Source`` of primitive choices, so one generator serves both runs:
Hypothesis draws them in the test suite (``DrawSource``: shrinking, a few hundred inputs), a
seeded PRNG in bench/fuzz_edges.py (``RandomSource``: 10^6 inputs, as Hypothesis's engine
manages only a few hundred structured inputs per second here).
"""

from __future__ import annotations

import functools
import json
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.protobuf import descriptor as pb_descriptor
from google.protobuf import message_factory
from google.protobuf.message import Message as ProtoMessage
from hypothesis import strategies as st

from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.codes import LanguageCode, RequestCode, SerializeType
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand

T = TypeVar("T")


class Source(Protocol):
    def pick(self, pool: Sequence[T]) -> T: ...
    def integer(self, lo: int, hi: int) -> int: ...
    def binary(self, max_size: int) -> bytes: ...
    def text(self, max_size: int) -> str: ...


class RandomSource:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, pool: Sequence[T]) -> T:
        return pool[self.rng.randrange(len(pool))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def binary(self, max_size: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, max_size))

    def text(self, max_size: int) -> str:
        out = []
        for _ in range(self.rng.randint(0, max_size)):
            cp = self.rng.choice((self.rng.randint(0, 127), self.rng.randint(0, 0x10FFFF)))
            out.append(chr(cp if not 0xD800 <= cp <= 0xDFFF else 0xFFFD))  # no surrogates
        return "".join(out)


@functools.cache
def _sampled(pool: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(pool)


class DrawSource:
    """Choices drawn by Hypothesis (``st.data()``), so failures shrink."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def pick(self, pool: Sequence[T]) -> T:
        return self.data.draw(_sampled(tuple(pool)))  # type: ignore[no-any-return]

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def binary(self, max_size: int) -> bytes:
        return self.data.draw(st.binary(max_size=max_size))

    def text(self, max_size: int) -> str:
        return self.data.draw(st.text(max_size=max_size))


def chance(src: Source, one_in: int = 2) -> bool:
    return src.integer(1, one_in) == 1


# ------------------------------------------------------------------ values

TOPICS = ("FuzzT0", "FuzzT1", "%RETRY%FuzzG0", "%DLQ%FuzzG0")
GROUPS = ("FuzzG0", "FuzzG1")
NAMES = (
    *TOPICS, *GROUPS, "TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "broker-a",
    "DefaultCluster", "NewFuzzTopic", "", " ", "bad name", "T" * 128, "G" * 256, "T\n", "../x",
    "a|b", "%RETRY%", "Tö",
)  # fmt: skip
INTS = (
    0, 1, -1, 2, 3, 4, 7, 8, 16, 32, 1023, 1024, 1025, 2**31 - 1, 2**31, -(2**31),
    -(2**31) - 1, 2**62, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**20,
    253_402_300_799_999, 1_700_000_000_000,
)  # fmt: skip
TEXTS = (
    "", " ", "true", "false", "TRUE", "1.5", "-0", "inf", "-inf", "nan", "1e400", "0x10",
    "*", "A || B", "||", "TAG", "SQL92", "SINGLE_TAG", "null", "{}", "\x00", "٣",
    "a > 5 AND TAGS IN ('A')", "a BETWEEN 2 AND 1", "a >",
)  # fmt: skip
FLOATS = (0.5, -0.0, 1e10, 1e-5, 1e300, -1e300, float("inf"), float("nan"), 2.0**63)


def an_int(src: Source) -> int:
    kind = src.integer(0, 3)
    if kind == 0:
        return src.pick(INTS)
    if kind == 1:
        return src.integer(-40, 40)
    return src.integer(-(2**64), 2**64) if kind == 2 else src.integer(-(2**80), 2**80)


def field_value(src: Source) -> str:
    """A header value: numbers twice as often as names or text, since most limits are."""
    kind = src.integer(0, 5)
    if kind <= 1:
        return str(an_int(src))
    if kind == 2:
        return src.pick(NAMES)
    if kind == 3:
        return src.pick(TEXTS)
    return src.text(24) if kind == 4 else str(src.pick(FLOATS))


def json_value(src: Source, depth: int = 0) -> Any:
    kind = src.integer(0, 7 if depth < 2 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return src.pick((True, False))
    if kind == 2:
        return an_int(src)
    if kind == 3:
        return src.pick(NAMES)
    if kind == 4:
        return src.pick(TEXTS) if chance(src) else src.text(16)
    if kind == 5:
        return src.pick(FLOATS)
    if kind == 6:
        return [json_value(src, depth + 1) for _ in range(src.integer(0, 3))]
    keys = (*TEXTS, *NAMES)
    return {src.pick(keys): json_value(src, depth + 1) for _ in range(src.integer(0, 3))}


def overridden(
    src: Source, template: dict[str, Any], value: Callable[[Source], Any], changes: int = 4
) -> dict[str, Any]:
    """The template with up to ``changes`` members replaced by ``value`` or dropped."""
    out = dict(template)
    keys = tuple(sorted(template))
    for _ in range(src.integer(0, changes)):
        key = src.pick(keys)
        if chance(src, 4):
            out.pop(key, None)
        else:
            out[key] = value(src)
    return out


def to_json(value: Any) -> bytes:
    return json.dumps(value).encode()  # Python's json writes any integer, NaN and Infinity


# ------------------------------------------------------------------ remoting requests


def send_fields(topic: str = "FuzzT0") -> dict[str, Any]:
    return {
        "producerGroup": "FuzzPG", "topic": topic, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 1_700_000_000_000,
        "flag": 0, "properties": "", "reconsumeTimes": 0,
    }  # fmt: skip


_V2 = dict(zip("abcdefghij", send_fields().values(), strict=True))
_QUEUE = {"topic": "FuzzT0", "queueId": 0}
_GROUP_QUEUE = {"consumerGroup": "FuzzG0", **_QUEUE}
# A valid header of each request code the broker serves.
TEMPLATES: dict[int, dict[str, Any]] = {
    RequestCode.SEND_MESSAGE: send_fields(),
    RequestCode.SEND_MESSAGE_V2: _V2,
    RequestCode.SEND_BATCH_MESSAGE: _V2,
    RequestCode.CONSUMER_SEND_MSG_BACK: {
        "group": "FuzzG0", "offset": 0, "delayLevel": 0, "originTopic": "FuzzT0",
        "maxReconsumeTimes": 16,
    },
    RequestCode.PULL_MESSAGE: {
        **_GROUP_QUEUE, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0,
        "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0, "expressionType": "TAG",
    },
    RequestCode.QUERY_CONSUMER_OFFSET: _GROUP_QUEUE,
    RequestCode.UPDATE_CONSUMER_OFFSET: {**_GROUP_QUEUE, "commitOffset": 1},
    RequestCode.GET_MAX_OFFSET: _QUEUE,
    RequestCode.GET_MIN_OFFSET: _QUEUE,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: {**_QUEUE, "timestamp": 1_700_000_000_000},
    RequestCode.GET_EARLIEST_MSG_STORETIME: _QUEUE,
    RequestCode.UNREGISTER_CLIENT: {"clientID": "fuzz@1", "consumerGroup": "FuzzG0"},
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: {"consumerGroup": "FuzzG0"},
    RequestCode.VIEW_MESSAGE_BY_ID: {"offset": 0},
    RequestCode.QUERY_MESSAGE: {
        "topic": "FuzzT0", "key": "k", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**40,
    },
    RequestCode.UPDATE_AND_CREATE_TOPIC: {
        "topic": "FuzzT1", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
        "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false",
    },
    RequestCode.DELETE_TOPIC_IN_BROKER: {"topic": "NewFuzzTopic"},
    RequestCode.GET_CONSUME_STATS: {"consumerGroup": "FuzzG0", "topic": "FuzzT0"},
    RequestCode.DELETE_SUBSCRIPTIONGROUP: {"groupName": "FuzzG1"},
    RequestCode.SEND_REPLY_MESSAGE: send_fields(),
    RequestCode.SEND_REPLY_MESSAGE_V2: _V2,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: {
        "topic": "FuzzT0", "group": "FuzzG0", "timestamp": 1_700_000_000_000, "isForce": "false",
    },
    RequestCode.GET_CONSUMER_RUNNING_INFO: {"consumerGroup": "FuzzG0", "clientId": "fuzz@1"},
    RequestCode.END_TRANSACTION: {
        "producerGroup": "FuzzPG", "tranStateTableOffset": 0, "commitLogOffset": 0,
        "commitOrRollback": 8, "fromTransactionCheck": "false",
        "msgId": "7F00000100002A9F0000000000000000", "transactionId": "fuzz-tx",
    },
    RequestCode.CONSUME_MESSAGE_DIRECTLY: {
        "consumerGroup": "FuzzG0", "clientId": "fuzz@1",
        "msgId": "7F00000100002A9F0000000000000000",
    },
}  # fmt: skip
# Codes nobody serves must be answered too.
UNSERVED = (RequestCode.POP_MESSAGE, RequestCode.REGISTER_BROKER, 99999, -1)
# Header fields a handler may read although its template lacks them.
_EXTRA_FIELDS = ("batch", "unitMode", "topicList", "topic", "order", "key", "maxNum")
_PROPERTY_KEYS = (
    "TAGS", "KEYS", "DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "UNIQ_KEY",
    "WAIT", "RETRY_TOPIC", "MAX_RECONSUME_TIMES", "__STARTDELIVERTIME", "REAL_TOPIC",
    "TRAN_MSG", "PGROUP", "CHECK_IMMUNITY_TIME_IN_SECONDS", "REPLY_TO_CLIENT", "CORRELATION_ID",
)  # fmt: skip


def properties(src: Source) -> str:
    """A 4.x properties string carrying the properties the broker acts on."""
    keys = (*_PROPERTY_KEYS, *TEXTS)
    return encode_properties({src.pick(keys): field_value(src) for _ in range(src.integer(0, 4))})


_SUBSCRIPTION = {
    "topic": "FuzzT0", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0,
    "expressionType": "TAG",
}  # fmt: skip
_CONSUMER = {
    "groupName": "FuzzG0", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
}  # fmt: skip
_MQ = {"topic": "FuzzT0", "brokerName": "broker-a", "queueId": 0}
_GROUP_CONFIG = {
    "groupName": "FuzzG1", "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16,
    "brokerId": 0, "consumeMessageOrderly": False,
}  # fmt: skip


def _some(src: Source, make: Callable[[Source], Any], most: int = 2) -> list[Any]:
    return [make(src) for _ in range(src.integer(0, most))]


def _json_body(src: Source, code: int) -> Any:
    """A JSON body shaped like what the code expects, with members fuzzed at every level."""
    if code == RequestCode.HEART_BEAT:
        consumer = lambda s: {  # noqa: E731
            **overridden(s, _CONSUMER, json_value, 2),
            "subscriptionDataSet": _some(s, lambda t: overridden(t, _SUBSCRIPTION, json_value, 2)),
        }
        base = {"clientID": "fuzz@1", "producerDataSet": [{"groupName": "FuzzPG"}]}
        return overridden(src, {**base, "consumerDataSet": _some(src, consumer)}, json_value, 2)
    if code == RequestCode.CHECK_CLIENT_CONFIG:
        sql = {**_SUBSCRIPTION, "subString": "a > 5", "expressionType": "SQL92"}
        base = {"clientId": "fuzz@1", "group": "FuzzG0"}
        return {**base, "subscriptionData": overridden(src, sql, json_value, 2)}
    if code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        mqs = [overridden(src, _MQ, json_value, 2) for _ in range(src.integer(1, 3))]
        base = {"consumerGroup": "FuzzG0", "clientId": "fuzz@1", "mqSet": mqs}
        return overridden(src, base, json_value, 2)
    return overridden(src, _GROUP_CONFIG, json_value)


_JSON_BODIES = (
    RequestCode.HEART_BEAT, RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.CHECK_CLIENT_CONFIG,
)  # fmt: skip
_BATCH_CODES = (RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_MESSAGE_V2)


def batch_body(src: Source) -> bytes:
    """A SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages), lengths right or not."""
    parts = []
    for _ in range(src.integer(0, 3)):
        body, raw = src.binary(16), properties(src).encode()
        size = 20 + len(body) + 2 + len(raw) if chance(src, 8) else src.pick(INTS[:12])
        flag = src.integer(-(2**31), 2**31 - 1)
        parts += [struct.pack(">iiiii", size, 0, 0, flag, len(body)), body]
        parts += [struct.pack(">h", len(raw) & 0x7FFF), raw]
    return b"".join(parts)


def body(src: Source, code: int) -> bytes:
    if code in _JSON_BODIES:
        kind = src.integer(0, 2)
        if kind == 0:
            return to_json(_json_body(src, code))
        return to_json(json_value(src)) if kind == 1 else src.binary(64)
    if code in _BATCH_CODES and chance(src):
        return batch_body(src)
    return src.binary(64)


def remoting_request(src: Source, codes: Sequence[int]) -> RemotingCommand:
    """A request of one of ``codes`` (or a code nobody serves): the code's template with up to
    four fields replaced by random values or dropped, and a body for the code."""
    code = src.pick((*codes, *UNSERVED))
    template = TEMPLATES.get(code, {})
    # The extra fields start absent (None) and are sent only when the fuzzer sets them.
    base = {**dict.fromkeys(_EXTRA_FIELDS), **template}
    fields = {k: v for k, v in overridden(src, base, field_value).items() if v is not None}
    for key in ("properties", "i"):
        if key in template and chance(src):
            fields[key] = properties(src)
    return RemotingCommand(
        code=code,
        ext_fields={k: str(v) for k, v in fields.items()},
        body=body(src, code),
        serialize_type=src.pick(tuple(SerializeType)),
        language=src.pick(tuple(LanguageCode)),
        opaque=src.integer(0, 2**31 - 1),
    )


# ------------------------------------------------------------------ remoting frames


def _frame_of(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == SerializeType.ROCKETMQ and not -(2**15) <= cmd.code < 2**15:
        cmd.serialize_type = SerializeType.JSON  # the binary header's code is a short
    return cmd.encode()


def _mutated_frame(src: Source) -> bytes:
    """A valid frame, then with bytes overwritten and perhaps truncated."""
    data = bytearray(_frame_of(remoting_request(src, tuple(TEMPLATES))))
    for _ in range(src.integer(0, 3)):
        pos = src.integer(0, len(data) - 1)
        data[pos : pos + 4] = src.binary(4) or b"\xff"
    if chance(src):
        data = data[: src.integer(0, len(data))]
    return bytes(data)


_HEADER = {
    "code": 10, "language": "JAVA", "version": 401, "opaque": 1, "flag": 0, "remark": "r",
    "extFields": {"topic": "FuzzT0"}, "serializeTypeCurrentRPC": "JSON",
}  # fmt: skip


def _json_frame(src: Source) -> bytes:
    raw = to_json(overridden(src, _HEADER, json_value))
    return struct.pack(">iI", 4 + len(raw), len(raw)) + raw


def codec_input(src: Source) -> tuple[bytes, list[int]]:
    """Bytes (random, a mutated frame, a JSON header of random members, or several frames) and
    the sizes of the pieces they arrive in."""
    kind = src.integer(0, 3)
    if kind == 0:
        data = src.binary(300)
    elif kind == 1:
        data = _mutated_frame(src)
    elif kind == 2:
        data = _json_frame(src)
    else:
        data = b"".join(_mutated_frame(src) for _ in range(src.integer(2, 3)))
    return data, [src.integer(1, 64) for _ in range(src.integer(0, 8))]


# ------------------------------------------------------------------ gRPC requests


@dataclass(frozen=True)
class GrpcCall:
    method: str
    requests: list[ProtoMessage]
    metadata: tuple[tuple[str, str], ...]


SERVICE = svc.DESCRIPTOR.services_by_name["MessagingService"]
GRPC_METHODS = tuple(sorted(m.name for m in SERVICE.methods))
_F = pb_descriptor.FieldDescriptor
_DURATION_SECONDS = (0, 1, 5, 15, 60, -1, -10, 2**31, 315_576_000_000, -315_576_000_000)
_PROTO_INTS = (0, 1, -1, 4, 32, 1024, 1025, 2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63))
_HANDLES = ("", "not a handle", "1 2 3 0 0 broker-a 0 0", "0 0 60000 0 0 broker-a 0 0 0 FuzzT0")
_INT64 = (_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64)
_UNSIGNED = (_F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_FIXED32, _F.TYPE_FIXED64)


def proto_message(src: Source, descriptor: pb_descriptor.Descriptor, depth: int = 0) -> Any:
    """A message of ``descriptor`` with a random subset of its fields set."""
    msg = message_factory.GetMessageClass(descriptor)()
    if descriptor.full_name == "google.protobuf.Duration":
        msg.seconds = src.pick(_DURATION_SECONDS) if chance(src) else src.integer(-(2**40), 2**40)
        msg.nanos = src.pick((0, 100_000_000, 999_999_999, -1))
        return msg
    if descriptor.full_name == "google.protobuf.Timestamp":
        msg.seconds = src.pick((0, -1, 1_700_000_000, 1_700_000_000_000, 2**40))
        return msg
    for fd in descriptor.fields:
        if chance(src, 3):
            continue
        if fd.type != _F.TYPE_MESSAGE:
            if fd.is_repeated:
                getattr(msg, fd.name).extend(_some(src, lambda s, fd=fd: scalar(s, fd), 3))
            else:
                setattr(msg, fd.name, scalar(src, fd))
        elif depth < 3 and fd.message_type.GetOptions().map_entry:
            target = getattr(msg, fd.name)
            for _ in range(src.integer(0, 3)):
                target[src.pick(TEXTS)] = src.pick(TEXTS) if chance(src) else src.text(8)
        elif depth < 3 and fd.is_repeated:
            items = _some(src, lambda s, fd=fd: proto_message(s, fd.message_type, depth + 1), 3)
            getattr(msg, fd.name).extend(items)
        elif depth < 3:
            getattr(msg, fd.name).CopyFrom(proto_message(src, fd.message_type, depth + 1))
    return msg


def scalar(src: Source, fd: pb_descriptor.FieldDescriptor) -> Any:
    if fd.type == _F.TYPE_STRING:
        if "handle" in fd.name and chance(src):
            return src.pick(_HANDLES)
        return src.pick(NAMES) if chance(src) else field_value(src)
    if fd.type == _F.TYPE_BYTES:
        return src.binary(32)
    if fd.type == _F.TYPE_BOOL:
        return chance(src)
    if fd.type == _F.TYPE_ENUM:  # proto3 enums are open: unknown numbers arrive too
        known = [v.number for v in fd.enum_type.values]
        return src.pick(known) if chance(src) else an_int(src) % 64
    if fd.type in (_F.TYPE_FLOAT, _F.TYPE_DOUBLE):
        return src.pick(FLOATS)
    bits = 64 if fd.type in _INT64 or fd.type in (_F.TYPE_UINT64, _F.TYPE_FIXED64) else 32
    lo, hi = (0, 2**bits - 1) if fd.type in _UNSIGNED else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if chance(src):
        return src.integer(lo, hi)
    value = src.pick(_PROTO_INTS)
    return value if lo <= value <= hi else hi


_CLIENTS = ("fuzz-client@1@0@abc", "")
_NAMESPACES = ("", "ns", "bad ns!")


def grpc_call(src: Source) -> GrpcCall:
    method = src.pick(GRPC_METHODS)
    input_type = SERVICE.methods_by_name[method].input_type
    count = src.integer(1, 3) if method == "Telemetry" else 1
    requests = [proto_message(src, input_type) for _ in range(count)]
    meta = (("x-mq-client-id", src.pick(_CLIENTS)), ("x-mq-namespace", src.pick(_NAMESPACES)))
    return GrpcCall(method, requests, tuple((k, v) for k, v in meta if v))
