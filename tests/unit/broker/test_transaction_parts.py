"""The pieces of transactions without a store: the half, commit, copy and op transforms, the
producer registry (groups, turns, expiry, closed connections), the CHECK_TRANSACTION_STATE
frame a 4.x producer receives, and END_TRANSACTION's header fields."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from test_consumers import client

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.consumers import ConsumerManager
from pocketmq.broker.handlers.clients import ClientHandlers
from pocketmq.broker.handlers.transaction import end_of
from pocketmq.broker.transaction import CheckRequest, ProducerRegistry, RemotingChecker
from pocketmq.broker.transaction import half as tx
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, delay_property
from pocketmq.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand

HOST = ("127.0.0.1", 10911)


def producer_message(**props: str) -> MessageExt:
    return MessageExt(
        topic="PayTopic",
        body=b"pay",
        queue_id=3,
        flag=7,
        properties={
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: "PG",
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1",
            MessageConst.WAIT_STORE_MSG_OK: "true",
            **props,
        },
        sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE | SysFlag.MULTI_TAGS,
        born_timestamp=1_000,
        reconsume_times=0,
    )


def stored_half(queue_offset: int = 5, phy_offset: int = 4096, **props: str) -> MessageExt:
    half = tx.half_of(producer_message(**props))
    half.queue_offset, half.phy_offset = queue_offset, phy_offset
    return half


def test_is_half() -> None:
    assert tx.is_half(producer_message())
    by_flag = producer_message()
    del by_flag.properties[MessageConst.TRANSACTION_PREPARED]
    assert tx.is_half(by_flag)
    by_property = producer_message(**{MessageConst.TRANSACTION_PREPARED: "TRUE"})
    by_property.sys_flag = 0
    assert tx.is_half(by_property)
    # A retry of a client before 4.6.1 keeps TRAN_MSG; it is no half, and made visible.
    old_retry = producer_message(**{MessageConst.DELAY_TIME_LEVEL: "3"})
    old_retry.reconsume_times = 1
    assert not tx.is_half(old_retry)
    tx.make_visible(old_retry)
    assert SysFlag.transaction_value(old_retry.sys_flag) == SysFlag.TRANSACTION_NOT_TYPE
    assert old_retry.sys_flag & SysFlag.MULTI_TAGS


@pytest.mark.parametrize(
    ("sys_flag", "prepared"),
    [(0, None), (SysFlag.MULTI_TAGS, None), (0, "false"), (0, ""), (0, "true"), (0, "TRUE"),
     (SysFlag.TRANSACTION_PREPARED_TYPE, None), (SysFlag.TRANSACTION_COMMIT_TYPE, "false"),
     (SysFlag.TRANSACTION_ROLLBACK_TYPE | SysFlag.MULTI_TAGS, None)],
)  # fmt: skip
def test_a_batch_is_plain_when_each_message_is(sys_flag: int, prepared: str | None) -> None:
    odd = producer_message()
    odd.sys_flag = sys_flag
    del odd.properties[MessageConst.TRANSACTION_PREPARED]
    if prepared is not None:
        odd.properties[MessageConst.TRANSACTION_PREPARED] = prepared
    plain = MessageExt(topic="PayTopic", body=b"pay")
    for batch in ([odd], [plain, plain, odd], [odd, plain]):
        assert tx.all_plain(batch) is tx.is_plain(odd)
    assert tx.all_plain([plain, plain])


def test_half_commit_and_op() -> None:
    half = stored_half()
    assert (half.topic, half.queue_id) == (TRANS_HALF_TOPIC, 0)
    assert half.properties[MessageConst.REAL_TOPIC] == "PayTopic"
    assert half.properties[MessageConst.REAL_QUEUE_ID] == "3"
    assert half.properties[MessageConst.TRANSACTION_ID] == "U1"
    assert half.sys_flag == SysFlag.MULTI_TAGS  # PREPARED reset to NOT_TYPE

    msg = tx.committed(half, HOST)
    assert (msg.topic, msg.queue_id, msg.body, msg.flag) == ("PayTopic", 3, b"pay", 7)
    assert msg.sys_flag == SysFlag.MULTI_TAGS | SysFlag.TRANSACTION_COMMIT_TYPE
    assert msg.prepared_transaction_offset == 4096
    assert msg.born_timestamp == 1_000
    assert msg.properties == {
        MessageConst.PRODUCER_GROUP: "PG",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1",
        MessageConst.WAIT_STORE_MSG_OK: "true",
        MessageConst.TRANSACTION_ID: "U1",
    }

    op = tx.op_message([5, 9, 5], 0, HOST, 2_000)
    assert (op.topic, op.queue_id, op.tags, op.body) == (TRANS_OP_HALF_TOPIC, 0, "d", b"5,9,")
    assert op.properties[MessageConst.WAIT_STORE_MSG_OK] == "false"
    assert tx.parse_op_body(op.body) == [5, 9]
    assert tx.parse_op_body(b"12") == [12]  # RocketMQ 4's body
    assert tx.parse_op_body(b"x,3,") == [3]


def test_copies_know_their_first_half() -> None:
    half = stored_half(queue_offset=5)
    assert tx.first_half_offset(half) == 5
    # A producer's message carrying the broker's marks (a consumed message sent again).
    resent = stored_half(
        queue_offset=6,
        **{MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET: "1",
           MessageConst.TRANSACTION_CHECK_TIMES: "15"},
    )  # fmt: skip
    assert (tx.first_half_offset(resent), tx.check_times(resent)) == (6, None)
    assert tx.check_times(half) is None
    copy = tx.copy_of(half, checked=1)
    copy.queue_offset = 8
    assert tx.first_half_offset(copy) == 5
    assert tx.check_times(copy) == 1
    again = tx.copy_of(copy, checked=None)
    assert again.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    assert again.properties[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] == "5"
    assert again.properties[MessageConst.WAIT_STORE_MSG_OK] == "false"
    seen = tx.as_sent(copy)
    assert (seen.topic, seen.queue_id, seen.queue_offset) == ("PayTopic", 3, 8)


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("20", 20_000), ("1", 6_000), ("x", 6_000)]
)
def test_immunity_is_never_below_the_timeout(value: str | None, expected: int | None) -> None:
    props = {} if value is None else {MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: value}
    assert tx.immunity_ms(stored_half(**props), 6_000) == expected


def test_timed_halves() -> None:
    assert delay_property(producer_message().properties) is None
    assert (
        delay_property(producer_message(**{MessageConst.DELAY_TIME_LEVEL: "0"}).properties) is None
    )
    for name in (MessageConst.DELAY_TIME_LEVEL, MessageConst.TIMER_DELAY_SEC):
        assert delay_property(producer_message(**{name: "3"}).properties) == name


class Noting:
    def __init__(self) -> None:
        self.count = 0

    def check(self, half: MessageExt, request: CheckRequest) -> None:
        self.count += 1


def test_the_registry_takes_members_in_turn_and_expires_them() -> None:
    clock = FakeClock()
    registry = ProducerRegistry(120_000, clock=clock)
    a, b = Noting(), Noting()
    assert registry.pick("PG") is None
    registry.register("PG", "a", a)
    clock.advance(60_000)
    registry.register("PG", "b", b)
    assert {id(registry.pick("PG")) for _ in range(4)} == {id(a), id(b)}
    clock.advance(60_001)
    registry.scan_expired()
    assert registry.client_ids("PG") == ["b"]
    registry.register("PG", "b", b)  # a heartbeat renews
    clock.advance(120_000)
    registry.scan_expired()
    assert registry.pick("PG") is b
    registry.unregister_all("b")
    assert registry.pick("PG") is None and registry.groups == {}


async def test_a_closed_connection_removes_only_its_registrations() -> None:
    registry = ProducerRegistry(120_000)
    (old, _), (new, _) = client(), client()
    registry.register("PG", "c1", RemotingChecker(old, "broker-a"))
    registry.register("PG2", "c1", RemotingChecker(old, "broker-a"))
    registry.register("PG", "c2", RemotingChecker(new, "broker-a"))
    registry.unregister_checker(RemotingChecker(old, "broker-a"))
    assert registry.client_ids("PG") == ["c2"] and registry.client_ids("PG2") == []


async def test_the_remoting_check_is_a_one_way_check_transaction_state() -> None:
    channel, transport = client()
    half = stored_half()
    half.msg_id = "OFFSETID"
    request = CheckRequest(5, 4096, "U1", "OFFSETID", "U1", TRANS_HALF_TOPIC)
    RemotingChecker(channel, "broker-a").check(tx.as_sent(half), request)
    conn = RemotingConnection()
    conn.receive_data(bytes(transport.written))
    cmd = conn.next_command()
    assert isinstance(cmd, RemotingCommand) and conn.next_command() is NEED_DATA
    assert cmd.code == RequestCode.CHECK_TRANSACTION_STATE and cmd.is_oneway
    assert cmd.ext_fields == {
        "topic": TRANS_HALF_TOPIC, "tranStateTableOffset": "5", "commitLogOffset": "4096",
        "offsetMsgId": "OFFSETID", "bname": "broker-a", "msgId": "U1", "transactionId": "U1",
    }  # fmt: skip
    body = decode_message(cmd.body)
    assert (body.topic, body.queue_id, body.body, body.uniq_key) == ("PayTopic", 3, b"pay", "U1")
    assert body.properties[MessageConst.PRODUCER_GROUP] == "PG"


END_HEADER = {
    "producerGroup": "PG", "tranStateTableOffset": "5", "commitLogOffset": "4096",
    "commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": "U1",
    "transactionId": "U1",
}  # fmt: skip


def test_end_transaction_header() -> None:
    end = end_of(RemotingCommand.request(RequestCode.END_TRANSACTION, END_HEADER))
    assert (end.producer_group, end.queue_offset, end.commit_log_offset) == ("PG", 5, 4096)
    assert (end.resolution, end.from_check, end.msg_id) == (8, True, "U1")


@pytest.mark.parametrize(
    ("change", "code"),
    [({"commitOrRollback": "4"}, ResponseCode.SYSTEM_ERROR),
     ({"commitOrRollback": "x"}, ResponseCode.SYSTEM_ERROR),
     ({"commitLogOffset": "-1"}, ResponseCode.INVALID_PARAMETER),
     ({"tranStateTableOffset": "9223372036854775808"}, ResponseCode.SYSTEM_ERROR),
     ({"producerGroup": "bad group!"}, ResponseCode.INVALID_PARAMETER),
     ({"topic": "bad topic!"}, ResponseCode.INVALID_PARAMETER),
     ({"msgId": None}, ResponseCode.SYSTEM_ERROR),
     ({"producerGroup": None}, ResponseCode.SYSTEM_ERROR)],
)  # fmt: skip
def test_end_transaction_header_fields_are_checked(
    change: dict[str, str | None], code: int
) -> None:
    header = {k: v for k, v in {**END_HEADER, **change}.items() if v is not None}
    with pytest.raises(RequestError) as refused:
        end_of(RemotingCommand.request(RequestCode.END_TRANSACTION, header))
    assert refused.value.code == code


def client_handlers(registry: ProducerRegistry) -> ClientHandlers:
    broker: Any = SimpleNamespace(
        consumers=ConsumerManager(120_000), producers=registry, messaging=None,
        config=BrokerConfig(broker_name="broker-a"),
    )  # fmt: skip
    return ClientHandlers(broker)


async def test_heartbeats_register_producers_and_unregister_removes_them() -> None:
    registry = ProducerRegistry(120_000)
    handlers = client_handlers(registry)
    channel, _ = client()
    heartbeat = {"clientID": "10.0.0.1@42", "producerDataSet": [{"groupName": "PG"},
                                                                {"groupName": "PG2"}]}  # fmt: skip
    beat = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json_body.dumps(heartbeat))
    assert handlers.heart_beat(channel, beat).code == ResponseCode.SUCCESS
    assert registry.client_ids("PG") == registry.client_ids("PG2") == ["10.0.0.1@42"]
    assert registry.pick("PG") == RemotingChecker(channel, "broker-a")
    leave = RemotingCommand.request(
        RequestCode.UNREGISTER_CLIENT, {"clientID": "10.0.0.1@42", "producerGroup": "PG"}
    )
    handlers.unregister_client(channel, leave)
    assert registry.client_ids("PG") == [] and registry.client_ids("PG2") == ["10.0.0.1@42"]
    for bad in ({"producerDataSet": {"groupName": "PG"}}, {"producerDataSet": [{"x": 1}]},
                {"producerDataSet": [{"groupName": "bad group!"}]}):  # fmt: skip
        with pytest.raises(RequestError):
            handlers.heart_beat(
                channel, RemotingCommand.request(RequestCode.HEART_BEAT, {}, json_body.dumps(bad))
            )
