"""A slave broker's rules, against RocketMQ 4.9: every write refused (SERVICE_NOT_AVAILABLE,
SLAVE_NOT_AVAILABLE for END_TRANSACTION) before it changes anything, reads served, no offset
taken from a pull, suggestWhichBrokerId as PullMessageProcessor sets it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_parts import messaging_with_topic

from pocketmq.broker.consuming import PullQuery
from pocketmq.broker.messaging import MessagingService
from pocketmq.broker.status_map import pull_answer
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.transaction import EndTransaction
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageExt, SysFlag
from pocketmq.protocol.names import retry_topic
from pocketmq.store import GetResult, GetStatus, PutStatus
from pocketmq.store.config import BrokerRole

TOPIC = "T"


@pytest.fixture
def messaging(tmp_path: Path) -> Iterator[MessagingService]:
    service = messaging_with_topic(tmp_path, TOPIC, 2)
    try:
        yield service
    finally:
        service.store.close()


def msg(body: bytes = b"x", topic: str = TOPIC) -> MessageExt:
    return MessageExt(topic=topic, body=body, queue_id=0, born_host=("127.0.0.1", 1),
                      store_host=("127.0.0.1", 2))  # fmt: skip


async def test_a_slave_refuses_sends_before_any_side_effect(messaging: MessagingService) -> None:
    messaging.store.role = BrokerRole.SLAVE
    with pytest.raises(RequestError) as info:
        messaging.topic_for_send("NewTopic")
    assert info.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "messages are put to the slave" in str(info.value)
    assert "brokerRole=SLAVE" in str(info.value)
    # Auto-creation did not run: the slave's topics are its master's.
    assert messaging.topics.get("NewTopic") is None
    for retry in (retry_topic("G"), TOPIC):
        with pytest.raises(RequestError):
            messaging.topic_for_send(retry)
    assert messaging.topics.get(retry_topic("G")) is None


async def test_a_slave_refuses_send_back_redelivery_and_end_transaction(
    messaging: MessagingService,
) -> None:
    put = await messaging.store.put_messages([msg()])
    assert put.ok
    messaging.store.role = BrokerRole.SLAVE
    with pytest.raises(RequestError) as info:
        await messaging.send_back("G", put.phy_offset, 0, None)
    assert info.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    origin = messaging.store.look_message_by_offset(put.phy_offset)
    assert origin is not None
    with pytest.raises(RequestError) as info:
        await messaging.redeliver("G", origin, original_topic=TOPIC, reconsume_times=1,
                                  retry_to=None)  # fmt: skip
    assert info.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert messaging.topics.get("%DLQ%G") is None
    end = EndTransaction(producer_group="P", commit_log_offset=put.phy_offset, queue_offset=0,
                         resolution=SysFlag.TRANSACTION_COMMIT_TYPE, from_check=False,
                         msg_id="")  # fmt: skip
    with pytest.raises(RequestError) as info:
        await messaging.end_transaction(end)
    assert info.value.code == ResponseCode.SLAVE_NOT_AVAILABLE
    assert str(info.value) == "Message store is slave mode, so end transaction is forbidden."


async def test_the_store_of_a_slave_refuses_every_put(messaging: MessagingService) -> None:
    messaging.store.role = BrokerRole.SLAVE
    result = await messaging.store.put_messages([msg()])
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "SLAVE" in result.detail
    assert messaging.max_offset(TOPIC, 0) == 0


async def test_a_slave_serves_pulls_and_keeps_no_offset_a_pull_carries(
    messaging: MessagingService,
) -> None:
    assert (await messaging.store.put_messages([msg(b"a"), msg(b"b")])).ok
    messaging.store.role = BrokerRole.SLAVE
    query = PullQuery("G", TOPIC, 0, 0, 32)
    result = await messaging.pull(query, 0, commit_offset=1)
    assert result.status is GetStatus.FOUND
    assert len(result.messages) == 2
    assert messaging.committed_offset("G", TOPIC, 0) == -1
    # UPDATE_CONSUMER_OFFSET is stored on a slave, as ConsumerManageProcessor does.
    messaging.commit_offset("G", TOPIC, 0, 2)
    assert messaging.committed_offset("G", TOPIC, 0) == 2


async def test_a_master_keeps_the_offset_a_pull_carries(messaging: MessagingService) -> None:
    assert (await messaging.store.put_messages([msg()])).ok
    await messaging.pull(PullQuery("G", TOPIC, 0, 0, 32), 0, commit_offset=1)
    assert messaging.committed_offset("G", TOPIC, 0) == 1


def result_of(status: GetStatus, lagging: bool = False) -> GetResult:
    result = GetResult(status, 5, 0, 10)
    result.suggest_pulling_from_slave = lagging
    return result


GROUP = SubscriptionGroupConfig("G", broker_id=3, which_broker_when_consume_slowly=7)


@pytest.mark.parametrize(
    ("status", "lagging", "slave_read", "slave", "offset", "expected"),
    [
        # slaveReadEnable off: always the master, whatever the lag or the role.
        (GetStatus.FOUND, True, False, False, 1, (ResponseCode.SUCCESS, 0)),
        (GetStatus.FOUND, False, False, True, 1, (ResponseCode.SUCCESS, 0)),
        # A slave still serves the pull: the code comes from the status.
        (GetStatus.OFFSET_OVERFLOW_ONE, False, False, True, 10, (ResponseCode.PULL_NOT_FOUND, 0)),
        # slaveReadEnable on: the group's slow-consumption broker when lagging, else its own.
        (GetStatus.FOUND, True, True, False, 1, (ResponseCode.SUCCESS, 7)),
        (GetStatus.FOUND, False, True, False, 1, (ResponseCode.SUCCESS, 3)),
        (GetStatus.FOUND, True, True, True, 1, (ResponseCode.SUCCESS, 7)),
        # A moved offset is corrected by a master only; a slave asks for a retry.
        (GetStatus.OFFSET_TOO_SMALL, False, False, False, 1, (ResponseCode.PULL_OFFSET_MOVED, 0)),
        (GetStatus.OFFSET_TOO_SMALL, False, False, True, 1,
         (ResponseCode.PULL_RETRY_IMMEDIATELY, 3)),
        (GetStatus.NO_MESSAGE_IN_QUEUE, False, True, True, 4,
         (ResponseCode.PULL_RETRY_IMMEDIATELY, 3)),
    ],
)  # fmt: skip
def test_suggest_which_broker_id(
    status: GetStatus, lagging: bool, slave_read: bool, slave: bool, offset: int,
    expected: tuple[int, int],
) -> None:  # fmt: skip
    got = pull_answer(result_of(status, lagging), offset, GROUP, slave_read_enable=slave_read,
                      slave=slave)  # fmt: skip
    assert got == expected


async def test_the_store_suggests_the_slave_when_a_pull_lags_beyond_memory(
    messaging: MessagingService,
) -> None:
    store = messaging.store
    assert (await store.put_messages([msg(b"a" * 100), msg(b"b" * 100)])).ok
    record = len(store.get_message(TOPIC, 0, 1, 1).messages[0])
    # RocketMQ's lag: the CommitLog's end minus where the last record read starts.
    store.memory_for_reads_bytes = record
    assert store.get_message(TOPIC, 0, 0, 1).suggest_pulling_from_slave
    assert not store.get_message(TOPIC, 0, 1, 1).suggest_pulling_from_slave
    store.memory_for_reads_bytes = 2 * record
    assert not store.get_message(TOPIC, 0, 0, 1).suggest_pulling_from_slave
