"""The transactional producer against RocketMQ's client behaviour, with no network: the
END_TRANSACTION header built from a send result or a check, the CommitLog offset decoded from
the offset message id, every listener outcome, check-backs answered on the channel they came
on, and the refusals. Brokers are a fake remoting layer that answers from a table."""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from pocketmq.client import LocalTransactionState, Message, TransactionProducer, message
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import Producer, SendResult, SendStatus
from pocketmq.client.route import MessageQueue
from pocketmq.client.transaction import (
    CheckRequest,
    end_fields_after_check,
    end_fields_after_send,
    run_listener,
)
from pocketmq.errors import ClientError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, create_offset_msg_id
from pocketmq.protocol.properties import decode_properties
from pocketmq.protocol.record_codec import encode_record
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel

BROKER = "127.0.0.1:10911"
MQ = MessageQueue("TxTopic", "broker-a", 2)
UNIQ = "0A0000010001000000000000000000AB"

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


def send_result(
    phy_offset: int = 123_456, host: tuple[str, int] = ("10.0.0.5", 10911)
) -> SendResult:
    return SendResult(
        status=SendStatus.SEND_OK,
        msg_id=UNIQ,
        offset_msg_id=create_offset_msg_id(host, phy_offset),
        message_queue=MQ,
        queue_offset=7,
    )


# ------------------------------------------------------------------ headers


def test_end_header_after_send_names_the_half_by_its_offsets() -> None:
    msg = message("TxTopic", b"x", properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ})
    for state, flag in (
        (COMMIT, SysFlag.TRANSACTION_COMMIT_TYPE),
        (ROLLBACK, SysFlag.TRANSACTION_ROLLBACK_TYPE),
        (UNKNOW, SysFlag.TRANSACTION_NOT_TYPE),
    ):
        assert end_fields_after_send(msg, send_result(), state, "PG") == {
            "producerGroup": "PG",
            "tranStateTableOffset": 7,  # the half's queue offset
            "commitLogOffset": 123_456,  # from the offset message id
            "commitOrRollback": flag,
            "fromTransactionCheck": False,
            "msgId": UNIQ,
            "transactionId": UNIQ,
            "topic": "TxTopic",
            "bname": "broker-a",
        }
    assert (SysFlag.TRANSACTION_NOT_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE) == (0, 8)
    assert SysFlag.TRANSACTION_ROLLBACK_TYPE == 12


@pytest.mark.parametrize(
    ("host", "phy_offset"),
    [(("10.0.0.5", 10911), 0), (("192.168.1.2", 1), 2**40 + 17), (("::1", 10911), 99)],
)
def test_commit_log_offset_is_decoded_from_ipv4_and_ipv6_offset_ids(
    host: tuple[str, int], phy_offset: int
) -> None:
    fields = end_fields_after_send(message("T", b"x"), send_result(phy_offset, host), COMMIT, "PG")
    assert fields["commitLogOffset"] == phy_offset


def test_an_offset_id_that_does_not_decode_is_a_client_error() -> None:
    bad = SendResult(SendStatus.SEND_OK, UNIQ, "not-hex", MQ, 7)
    with pytest.raises(ClientError, match="cannot end transaction"):
        end_fields_after_send(message("T", b"x"), bad, COMMIT, "PG")


def check_command(group: str = "PG", **extra: Any) -> tuple[RemotingCommand, MessageExt]:
    half = MessageExt(
        topic="TxTopic",
        body=b"half-body",
        queue_id=2,
        properties={
            MessageConst.PRODUCER_GROUP: group,
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ,
            MessageConst.TRANSACTION_PREPARED: "true",
        },
        sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE,
        store_host=("127.0.0.1", 10911),
    )
    header = {
        "topic": "RMQ_SYS_TRANS_HALF_TOPIC",
        "tranStateTableOffset": 41,
        "commitLogOffset": 9000,
        "msgId": UNIQ,
        "transactionId": UNIQ,
        "offsetMsgId": create_offset_msg_id(("127.0.0.1", 10911), 9000),
        "bname": "broker-a",
        **extra,
    }
    cmd = RemotingCommand.request(
        RequestCode.CHECK_TRANSACTION_STATE, header, bytes(encode_record(half)), oneway=True
    )
    return cmd, half


def test_end_header_after_check_echoes_the_checks_offsets() -> None:
    cmd, half = check_command()
    request = CheckRequest.from_command(cmd)
    assert end_fields_after_check(request, half, ROLLBACK, "PG") == {
        "producerGroup": "PG",
        "tranStateTableOffset": 41,
        "commitLogOffset": 9000,
        "commitOrRollback": SysFlag.TRANSACTION_ROLLBACK_TYPE,
        "fromTransactionCheck": True,
        "msgId": UNIQ,
        "transactionId": UNIQ,
        "topic": "RMQ_SYS_TRANS_HALF_TOPIC",
        "bname": "broker-a",
    }


# ------------------------------------------------------------------ listener outcomes


class SyncListener:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.threads: list[threading.Thread] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        return self.check_local_transaction(cast(MessageExt, msg))

    def check_local_transaction(self, msg: MessageExt) -> Any:
        self.threads.append(threading.current_thread())
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class AsyncListener(SyncListener):
    async def execute_local_transaction(self, msg: Message, arg: Any) -> Any:  # type: ignore[override]
        return self.check_local_transaction(cast(MessageExt, msg))


OUTCOMES = [
    (COMMIT, COMMIT, False),
    (ROLLBACK, ROLLBACK, False),
    (UNKNOW, UNKNOW, False),
    (None, UNKNOW, False),  # Java: a null answer is UNKNOW
    (RuntimeError("db down"), UNKNOW, True),  # Java: an exception is UNKNOW
    ("COMMIT_MESSAGE", UNKNOW, True),  # not a LocalTransactionState
]


@pytest.mark.parametrize(("answer", "state", "failed"), OUTCOMES)
async def test_listener_outcomes(answer: Any, state: LocalTransactionState, failed: bool) -> None:
    for listener in (SyncListener(answer), AsyncListener(answer)):
        got, error = await run_listener(listener.execute_local_transaction, None, None, None)
        assert got is state
        assert (error is not None) is failed
    # A plain function runs off the event loop's thread, an async one on it.
    sync, asyn = SyncListener(COMMIT), AsyncListener(COMMIT)
    await run_listener(sync.execute_local_transaction, None, None, None)
    await run_listener(asyn.execute_local_transaction, None, None, None)
    assert sync.threads[0] is not threading.current_thread()
    assert asyn.threads[0] is threading.current_thread()


# ------------------------------------------------------------------ a producer on fake brokers


class FakeRemoting:
    """Stands for the connections: answers requests from a table, records one-way ones."""

    def __init__(self) -> None:
        self.answers: dict[int, RemotingCommand] = {}
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.oneway: list[tuple[str, RemotingCommand]] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.requests.append((addr, cmd))
        return self.answers[cmd.code]

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.oneway.append((addr, cmd))

    async def close(self) -> None:
        pass


class FakeBrokers(ClientInstance):
    """A NameServer and broker "broker-a" answering from a table."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:9876", "10.0.0.1@test")
        self.fake = FakeRemoting()
        self.remoting = self.fake  # type: ignore[assignment]
        route = {
            "brokerDatas": [{"brokerName": "broker-a", "brokerAddrs": {"0": BROKER}}],
            "queueDatas": [
                {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
            ],
        }
        self.answer(RequestCode.GET_ROUTEINFO_BY_TOPIC, body=json_body.dumps(route))
        self.answer(RequestCode.HEART_BEAT)
        self.answer(RequestCode.UNREGISTER_CLIENT)
        self.stored(ResponseCode.SUCCESS)

    def answer(
        self, code: int, result: int = ResponseCode.SUCCESS, body: bytes = b"", **fields: Any
    ) -> None:
        self.fake.answers[code] = RemotingCommand.request(code).response(result, None, fields, body)

    def stored(self, result: int) -> None:
        self.answer(
            RequestCode.SEND_MESSAGE_V2,
            result,
            msgId=create_offset_msg_id(("127.0.0.1", 10911), 4242),
            queueId=MQ.queue_id,
            queueOffset=17,
        )

    def sent(self, code: int) -> list[RemotingCommand]:
        return [c for _, c in self.fake.requests + self.fake.oneway if c.code == code]


@pytest.fixture
async def brokers() -> AsyncIterator[FakeBrokers]:
    instance = FakeBrokers()
    yield instance
    await instance.close()


async def started(brokers: FakeBrokers, listener: Any, **options: Any) -> TransactionProducer:
    producer = TransactionProducer("PG", listener=listener, instance=brokers, **options)
    await producer.start()
    return producer


@pytest.mark.parametrize(
    ("answer", "state", "flag"),
    [
        (COMMIT, COMMIT, SysFlag.TRANSACTION_COMMIT_TYPE),
        (ROLLBACK, ROLLBACK, SysFlag.TRANSACTION_ROLLBACK_TYPE),
        (UNKNOW, UNKNOW, SysFlag.TRANSACTION_NOT_TYPE),
        (RuntimeError("db down"), UNKNOW, SysFlag.TRANSACTION_NOT_TYPE),
    ],
)
async def test_half_then_local_transaction_then_one_way_end(
    brokers: FakeBrokers, answer: Any, state: LocalTransactionState, flag: int
) -> None:
    producer = await started(brokers, AsyncListener(answer))
    result = await producer.send_message_in_transaction(message("TxTopic", b"order"), "arg")
    assert result.local_transaction_state is state
    (half,) = brokers.sent(RequestCode.SEND_MESSAGE_V2)
    assert int(half.ext_fields["f"]) & SysFlag.TRANSACTION_PREPARED_TYPE
    props = decode_properties(half.ext_fields["i"])
    assert props[MessageConst.TRANSACTION_PREPARED] == "true"
    assert props[MessageConst.PRODUCER_GROUP] == "PG"
    assert result.transaction_id == props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    ((addr, end),) = [(a, c) for a, c in brokers.fake.oneway]
    assert addr == BROKER and end.code == RequestCode.END_TRANSACTION
    assert end.ext_fields == {
        "producerGroup": "PG",
        "tranStateTableOffset": "17",
        "commitLogOffset": "4242",
        "commitOrRollback": str(flag),
        "fromTransactionCheck": "false",
        "msgId": result.msg_id,
        "transactionId": result.transaction_id,
        "topic": "TxTopic",
        "bname": "broker-a",
    }
    # An exception travels in the remark, as Java's "executeLocalTransactionBranch exception".
    assert (end.remark is not None) is isinstance(answer, Exception)
    await producer.shutdown()


async def test_a_half_not_stored_safely_is_rolled_back_without_the_local_transaction(
    brokers: FakeBrokers,
) -> None:
    listener = SyncListener(COMMIT)
    brokers.stored(ResponseCode.FLUSH_DISK_TIMEOUT)
    producer = await started(brokers, listener)
    result = await producer.send_message_in_transaction(message("TxTopic", b"order"))
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert result.local_transaction_state is ROLLBACK and listener.threads == []
    (end,) = brokers.sent(RequestCode.END_TRANSACTION)
    assert end.ext_fields["commitOrRollback"] == str(SysFlag.TRANSACTION_ROLLBACK_TYPE)
    await producer.shutdown()


async def test_the_group_is_announced_by_heartbeat_at_start_and_on_a_new_broker(
    brokers: FakeBrokers,
) -> None:
    # At start: the brokers of TBW102 hear of the group (it may only ever answer checks).
    producer = await started(brokers, AsyncListener(COMMIT))
    (route,) = brokers.sent(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    assert route.ext_fields["topic"] == "TBW102"
    (beat,) = brokers.sent(RequestCode.HEART_BEAT)
    assert brokers.fake.requests[-1] == (BROKER, beat)
    assert json_body.loads(beat.body)["producerDataSet"] == [{"groupName": "PG"}]
    for _ in range(3):
        await producer.send_message_in_transaction(message("TxTopic", b"order"))
    assert len(brokers.sent(RequestCode.HEART_BEAT)) == 1  # that broker knows the group
    # A half stored on a broker outside TBW102's route: that broker is told at once.
    brokers.broker_addrs["broker-a"] = {0: "127.0.0.1:20911"}
    await producer.send_message_in_transaction(message("TxTopic", b"order"))
    assert len(brokers.sent(RequestCode.HEART_BEAT)) == 2
    await producer.shutdown()


# ------------------------------------------------------------------ refusals


async def test_refusals(brokers: FakeBrokers) -> None:
    producer = await started(brokers, None)
    with pytest.raises(ClientError, match="TransactionListener is null"):
        await producer.send_message_in_transaction(message("TxTopic", b"x"))
    producer.transaction_listener = SyncListener(COMMIT)
    for prop, value in (
        (MessageConst.DELAY_TIME_LEVEL, "3"),
        (MessageConst.TIMER_DELIVER_MS, "1700000000000"),
        (MessageConst.TIMER_DELAY_SEC, "10"),
    ):
        with pytest.raises(ClientError, match="cannot be delayed"):
            await producer.send_message_in_transaction(
                message("TxTopic", b"x", properties={prop: value})
            )
    # A plain send of a half that asks for a delay is refused the same way.
    half = message("TxTopic", b"x", properties={"TRAN_MSG": "true", "DELAY": "2"})
    with pytest.raises(ClientError, match="cannot be delayed"):
        await producer.send(half)
    with pytest.raises(ClientError, match="not supported for batching"):
        await producer.send_batch(
            [message("TxTopic", b"a"), message("TxTopic", b"b", properties={"TRAN_MSG": "true"})]
        )
    assert brokers.sent(RequestCode.SEND_MESSAGE_V2) == []
    assert brokers.sent(RequestCode.SEND_BATCH_MESSAGE) == []
    # One transactional producer per group and client: a check must know whom to ask.
    twin = TransactionProducer("PG", listener=SyncListener(COMMIT), instance=brokers)
    with pytest.raises(ClientError, match="has been created before"):
        await twin.start()
    await producer.shutdown()
    assert "PG" not in brokers.transaction_checkers
    with pytest.raises(ClientError, match="must be >= 1"):
        TransactionProducer("PG", check_thread_pool_size=0)
    # A normal delayed message is still fine for a plain producer.
    plain = Producer("PG2", instance=brokers)
    await plain.start()
    await plain.send(message("TxTopic", b"x", properties={"DELAY": "2"}))
    await plain.shutdown()


# ------------------------------------------------------------------ check-back


class FakeChannel:
    """The broker connection a check arrived on: keeps what is written back one-way."""

    def __init__(self) -> None:
        self.peer = BROKER
        self.is_open = True
        self.written: list[RemotingCommand] = []
        self.arrived = asyncio.Event()

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        self.written.append(cmd)
        self.arrived.set()


async def answers(channel: FakeChannel, count: int) -> list[RemotingCommand]:
    async with asyncio.timeout(10):  # a guard against a hang, not a timing assertion
        while len(channel.written) < count:
            channel.arrived.clear()
            await channel.arrived.wait()
    return channel.written


def deliver(brokers: FakeBrokers, channel: FakeChannel, cmd: RemotingCommand) -> None:
    """What the client's connection does with a request from the broker."""
    result = brokers.dispatcher(cast(RemotingChannel, channel), cmd)
    assert result is None  # one-way: never answered


@pytest.mark.parametrize(
    ("answer", "flag", "failed"),
    [
        (COMMIT, SysFlag.TRANSACTION_COMMIT_TYPE, False),
        (ROLLBACK, SysFlag.TRANSACTION_ROLLBACK_TYPE, False),
        (UNKNOW, SysFlag.TRANSACTION_NOT_TYPE, False),
        (RuntimeError("lost"), SysFlag.TRANSACTION_NOT_TYPE, True),
    ],
)
async def test_a_check_is_answered_on_its_channel_from_a_check_thread(
    brokers: FakeBrokers, answer: Any, flag: int, failed: bool
) -> None:
    listener = SyncListener(answer)
    producer = await started(brokers, listener)
    channel = FakeChannel()
    deliver(brokers, channel, check_command()[0])
    (end,) = await answers(channel, 1)
    assert end.code == RequestCode.END_TRANSACTION
    assert end.ext_fields["fromTransactionCheck"] == "true"
    assert end.ext_fields["commitOrRollback"] == str(flag)
    assert end.ext_fields["tranStateTableOffset"] == "41"
    assert end.ext_fields["commitLogOffset"] == "9000"
    assert end.ext_fields["msgId"] == UNIQ
    assert (end.remark is not None) is failed
    assert listener.threads[0].name.startswith("tx-check-PG")
    assert brokers.fake.oneway == []  # nothing went to another connection
    await producer.shutdown()


async def test_a_check_decodes_the_half_message_with_its_body_inflated(
    brokers: FakeBrokers,
) -> None:
    seen: list[MessageExt] = []

    class Checker(AsyncListener):
        async def check_local_transaction(self, msg: MessageExt) -> Any:  # type: ignore[override]
            seen.append(msg)
            return COMMIT

    producer = await started(brokers, Checker(None))
    channel = FakeChannel()
    cmd, half = check_command()
    half.body = zlib.compress(b"a large body")
    half.sys_flag |= SysFlag.COMPRESSED
    cmd.body = bytes(encode_record(half))
    deliver(brokers, channel, cmd)
    await answers(channel, 1)
    assert seen[0].body == b"a large body"
    assert seen[0].topic == "TxTopic" and seen[0].uniq_key == UNIQ
    await producer.shutdown()


async def test_checks_nobody_here_can_answer_are_left_to_the_brokers_next_round(
    brokers: FakeBrokers,
) -> None:
    producer = await started(brokers, SyncListener(COMMIT))
    channel = FakeChannel()
    deliver(brokers, channel, check_command(group="OTHER_GROUP")[0])
    bad_header, _ = check_command(tranStateTableOffset="x")
    deliver(brokers, channel, bad_header)
    missing, _ = check_command()
    del missing.ext_fields["commitLogOffset"]
    deliver(brokers, channel, missing)
    garbage, _ = check_command()
    garbage.body = b"\x00\x00\x00\x08garbage!"
    deliver(brokers, channel, garbage)
    # A good check after them is answered, and is the only answer.
    deliver(brokers, channel, check_command()[0])
    (end,) = await answers(channel, 1)
    assert end.ext_fields["commitOrRollback"] == str(SysFlag.TRANSACTION_COMMIT_TYPE)
    await producer.shutdown()


async def test_checks_beyond_the_hold_max_are_dropped_not_queued_without_bound(
    brokers: FakeBrokers,
) -> None:
    release = threading.Event()

    class Slow(SyncListener):
        def check_local_transaction(self, msg: MessageExt) -> Any:
            release.wait(10)
            return COMMIT

    producer = await started(brokers, Slow(None), check_request_hold_max=2)
    channel = FakeChannel()
    cmd = check_command()[0]
    deliver(brokers, channel, cmd)
    await asyncio.sleep(0)  # the worker takes the first check off the queue
    for _ in range(5):  # two wait, three are dropped
        deliver(brokers, channel, check_command()[0])
    release.set()
    await answers(channel, 3)
    assert len(channel.written) == 3
    await producer.shutdown()
