"""Stored messages as v2 ``Message`` values: what the 5.x client's ``Message.fromProtobuf``
reads from them (message id, tag, keys, group, type, timestamps, hosts, digest, delivery
attempt, user properties), for messages sent by 5.x and by 4.x producers."""

from __future__ import annotations

import hashlib
import zlib

from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.grpc.convert import SendLimits, to_message_ext
from pocketmq.grpc.messages import MAX_INFLATED_BODY_BYTES, v2_message
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, create_offset_msg_id
from pocketmq.protocol.record_codec import decode_message, encode_record

STORE_HOST = ("10.0.0.7", 10911)
BORN_MS = 1_700_000_000_123
STORE_MS = 1_700_000_000_456


def stored(msg: MessageExt, *, queue_offset: int = 5, phy_offset: int = 4096) -> MessageExt:
    """The message as the store hands it back: encoded with its broker fields, decoded."""
    msg.store_host = STORE_HOST
    msg.store_timestamp = STORE_MS
    msg.queue_offset = queue_offset
    msg.phy_offset = phy_offset
    return decode_message(bytes(encode_record(msg)))


def millis(ts: Timestamp) -> int:
    # How the 5.x client reads a timestamp (Misc.to_mills).
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def md5(body: bytes) -> str:
    # How the 5.x client checks an MD5 body digest (Misc.md5_checksum).
    return hashlib.md5(body, usedforsecurity=False).hexdigest().upper()


def test_a_5x_message_reads_back_as_sent() -> None:
    sent = pb.Message(
        topic=pb.Resource(name="Orders"),
        user_properties={"region": "eu", "trace": "t-1"},
        system_properties=pb.SystemProperties(
            tag="TagA",
            keys=["k1", "k2"],
            message_id="0A0B0C0D0E0F",
            message_type=pb.FIFO,
            message_group="customer-42",
            born_timestamp=Timestamp(seconds=BORN_MS // 1000, nanos=123_000_000),
        ),
        body=b"hello",
    )
    ext = to_message_ext(sent, SendLimits(max_body_size=1024), ("192.168.1.9", 50123))
    ext.queue_id = 2
    got = v2_message(stored(ext), queue_id=2, queue_offset=5)
    sp = got.system_properties
    assert got.topic.name == "Orders"
    assert got.body == b"hello"
    assert dict(got.user_properties) == {"region": "eu", "trace": "t-1"}
    assert sp.message_id == "0A0B0C0D0E0F"
    assert sp.tag == "TagA"
    assert list(sp.keys) == ["k1", "k2"]
    assert sp.message_type == pb.FIFO
    assert sp.message_group == "customer-42"
    assert not sp.HasField("delivery_timestamp")
    assert millis(sp.born_timestamp) == BORN_MS
    assert millis(sp.store_timestamp) == STORE_MS
    assert sp.born_host == "192.168.1.9"
    assert sp.store_host == "10.0.0.7:10911"
    assert (sp.queue_id, sp.queue_offset) == (2, 5)
    assert sp.delivery_attempt == 1
    assert sp.body_encoding == pb.IDENTITY
    assert sp.body_digest == pb.Digest(type=pb.MD5, checksum=md5(b"hello"))


def test_a_4x_message_without_client_id_gets_its_offset_message_id() -> None:
    msg = stored(
        MessageExt(topic="T", body=b"x", properties={MessageConst.KEYS: "a  b"}, reconsume_times=3),
        phy_offset=8192,
    )
    sp = v2_message(msg, queue_id=0, queue_offset=7).system_properties
    assert sp.message_id == create_offset_msg_id(STORE_HOST, 8192) == msg.msg_id
    assert list(sp.keys) == ["a", "b"]  # the separator, not empty keys
    assert not sp.HasField("tag")
    assert not sp.HasField("message_group")
    assert sp.message_type == pb.NORMAL
    assert sp.delivery_attempt == 4
    assert sp.queue_offset == 7


def test_only_user_properties_are_user_properties() -> None:
    props = {
        MessageConst.TAGS: "A",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "ID",
        MessageConst.WAIT_STORE_MSG_OK: "true",
        MessageConst.RETRY_TOPIC: "Orders",
        MessageConst.REAL_TOPIC: "Orders",
        "color": "blue",
    }
    msg = stored(MessageExt(topic="T", body=b"x", properties=props))
    got = v2_message(msg, queue_id=0, queue_offset=0)
    assert dict(got.user_properties) == {"color": "blue"}


def test_the_reported_topic_can_differ_from_the_stored_one() -> None:
    msg = stored(MessageExt(topic="%RETRY%CG", body=b"x"))
    assert v2_message(msg, queue_id=0, queue_offset=0, topic="Orders").topic.name == "Orders"
    assert v2_message(msg, queue_id=0, queue_offset=0).topic.name == "%RETRY%CG"


def test_delivery_time_and_type() -> None:
    def read(props: dict[str, str]) -> pb.SystemProperties:
        msg = stored(MessageExt(topic="T", body=b"x", properties=props))
        return v2_message(msg, queue_id=0, queue_offset=0).system_properties

    sent = read({MessageConst.TIMER_DELIVER_MS: "1700000005000"})
    assert sent.message_type == pb.DELAY
    assert millis(sent.delivery_timestamp) == 1_700_000_005_000
    # What the timer service delivers: the time is kept in TIMER_OUT_MS.
    delivered = read({MessageConst.TIMER_OUT_MS: "1700000006000"})
    assert delivered.message_type == pb.DELAY
    assert millis(delivered.delivery_timestamp) == 1_700_000_006_000
    level = read({MessageConst.DELAY_TIME_LEVEL: "3"})
    assert level.message_type == pb.DELAY
    assert not level.HasField("delivery_timestamp")
    garbage = read({MessageConst.TIMER_OUT_MS: "soon", MessageConst.SHARDING_KEY: "g"})
    assert not garbage.HasField("delivery_timestamp")
    assert garbage.message_type == pb.FIFO
    transaction = read({MessageConst.TRANSACTION_PREPARED: "true", MessageConst.SHARDING_KEY: "g"})
    assert transaction.message_type == pb.TRANSACTION


def test_a_compressed_4x_body_goes_out_inflated() -> None:
    body = b"a body worth compressing " * 100
    msg = stored(MessageExt(topic="T", body=zlib.compress(body), sys_flag=SysFlag.COMPRESSED))
    got = v2_message(msg, queue_id=0, queue_offset=0)
    assert got.body == body
    assert got.system_properties.body_encoding == pb.IDENTITY
    assert got.system_properties.body_digest.checksum == md5(body)


def test_a_compressed_body_that_does_not_inflate_goes_out_as_stored() -> None:
    for raw in (b"not zlib at all", zlib.compress(b"x" * 1000)[:-6]):
        msg = stored(MessageExt(topic="T", body=raw, sys_flag=SysFlag.COMPRESSED))
        got = v2_message(msg, queue_id=0, queue_offset=0)
        assert got.body == raw
        assert got.system_properties.body_digest.checksum == md5(raw)


def test_a_compressed_body_is_inflated_only_up_to_the_bound() -> None:
    bomb = zlib.compress(b"\0" * (MAX_INFLATED_BODY_BYTES + 1), 9)
    msg = MessageExt(topic="T", body=bomb, sys_flag=SysFlag.COMPRESSED)
    assert v2_message(msg, queue_id=0, queue_offset=0).body == bomb
