"""Transactions on a real store and a fake clock: a half is invisible until committed, a
transaction resolves once, ends naming the wrong half are refused with RocketMQ's codes, and
the check-back (timeout, immunity, the producer's group, the durable count, the rollback after
transactionCheckMax) survives a restart of the store."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from tx_harness import COMMIT, GROUP, ROLLBACK, TOPIC, UNKNOWN, Broker, NotingChecker

from pocketmq.broker.transaction import EndTransaction
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import MessageConst, SysFlag
from pocketmq.protocol.names import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_GROUP,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

TIMEOUT_MS = 6_000  # transactionTimeOut
INTERVAL_MS = 30_000  # transactionCheckInterval


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, FakeClock())
    yield b
    b.store.close()


def checker_of(broker: Broker, group: str = GROUP, client: str = "c1") -> NotingChecker:
    checker = NotingChecker()
    broker.producers.register(group, client, checker)
    return checker


async def test_a_half_is_stored_out_of_sight_until_committed(broker: Broker) -> None:
    result = await broker.send_half("U1")
    assert broker.visible() == []
    [stored] = broker.queue(TRANS_HALF_TOPIC)
    assert (stored.queue_offset, stored.phy_offset) == (result.queue_offset, result.phy_offset)
    assert stored.properties[MessageConst.REAL_TOPIC] == TOPIC
    assert stored.properties[MessageConst.REAL_QUEUE_ID] == "1"
    assert stored.properties[MessageConst.TRANSACTION_ID] == "U1"
    assert SysFlag.transaction_value(stored.sys_flag) == SysFlag.TRANSACTION_NOT_TYPE

    await broker.end(result, COMMIT)
    [msg] = broker.visible()
    assert (msg.topic, msg.queue_id, msg.body, msg.uniq_key) == (TOPIC, 1, b"body-U1", "U1")
    assert SysFlag.transaction_value(msg.sys_flag) == SysFlag.TRANSACTION_COMMIT_TYPE
    assert msg.prepared_transaction_offset == result.phy_offset
    for gone in (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID,
                 MessageConst.TRANSACTION_PREPARED):  # fmt: skip
        assert gone not in msg.properties
    assert msg.properties[MessageConst.PRODUCER_GROUP] == GROUP
    [op] = broker.queue(TRANS_OP_HALF_TOPIC)
    assert (op.tags, op.body) == ("d", f"{result.queue_offset},".encode())


async def test_a_rollback_is_never_visible(broker: Broker) -> None:
    result = await broker.send_half("U1")
    await broker.end(result, ROLLBACK)
    assert broker.visible() == []
    assert [op.body for op in broker.queue(TRANS_OP_HALF_TOPIC)] == [b"0,"]
    broker.clock.advance(10 * INTERVAL_MS)
    checker = checker_of(broker)
    await broker.tx.check_round()
    assert checker.asked == []


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [(ROLLBACK, COMMIT, "rolled back"), (COMMIT, ROLLBACK, "committed")],
)
async def test_a_transaction_resolves_once(
    broker: Broker, first: int, second: int, outcome: str
) -> None:
    result = await broker.send_half("U1")
    await broker.end(result, first)
    with pytest.raises(RequestError) as refused:
        await broker.end(result, second)
    assert refused.value.code == ResponseCode.ILLEGAL_OPERATION
    assert f"already {outcome}" in refused.value.remark
    assert len(broker.visible()) == (1 if first == COMMIT else 0)
    assert len(broker.queue(TRANS_OP_HALF_TOPIC)) == 1


@pytest.mark.parametrize("resolution", [COMMIT, ROLLBACK])
async def test_the_same_end_twice_is_done_once(broker: Broker, resolution: int) -> None:
    result = await broker.send_half("U1")
    await broker.end(result, resolution)
    await broker.end(result, resolution)
    assert len(broker.visible()) == (1 if resolution == COMMIT else 0)
    assert len(broker.queue(TRANS_OP_HALF_TOPIC)) == 1


async def test_two_ends_at_once_apply_one(broker: Broker) -> None:
    result = await broker.send_half("U1")
    outcomes = await asyncio.gather(
        broker.end(result, COMMIT), broker.end(result, ROLLBACK), return_exceptions=True
    )
    assert outcomes[0] is None
    assert isinstance(outcomes[1], RequestError)
    assert len(broker.visible()) == 1


async def test_ends_naming_the_wrong_half_are_refused(broker: Broker) -> None:
    result = await broker.send_half("U1")
    normal = broker.half("P1")
    normal.sys_flag = 0
    del normal.properties[MessageConst.TRANSACTION_PREPARED]
    plain = await broker.messaging.send(normal)
    cases = [
        (EndTransaction("OTHER_GROUP", result.phy_offset, result.queue_offset, COMMIT, False, "m"),
         "The producer group wrong"),
        (EndTransaction(GROUP, result.phy_offset, result.queue_offset + 1, COMMIT, False, "m"),
         "The transaction state table offset wrong"),
        (EndTransaction(GROUP, 1 << 40, 0, COMMIT, False, "m"),
         "Find prepared transaction message failed"),
        (EndTransaction(GROUP, plain.phy_offset, None, ROLLBACK, False, "m"),
         "Find prepared transaction message failed"),
    ]  # fmt: skip
    for end, remark in cases:
        with pytest.raises(RequestError) as refused:
            await broker.tx.end(end)
        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        assert remark in refused.value.remark
    # Without group and queue offset (what they are checked against is optional) it commits.
    await broker.tx.end(EndTransaction(None, result.phy_offset, None, COMMIT, False, "m"))
    assert [m.uniq_key for m in broker.visible()] == ["P1", "U1"]


async def test_an_unknown_answer_leaves_the_half_open(broker: Broker) -> None:
    result = await broker.send_half("U1")
    await broker.end(result, UNKNOWN)
    assert broker.visible() == [] and broker.queue(TRANS_OP_HALF_TOPIC) == []
    await broker.end(result, COMMIT)
    assert len(broker.visible()) == 1


async def test_a_half_is_checked_only_after_the_timeout(broker: Broker) -> None:
    checker = checker_of(broker)
    result = await broker.send_half("U1")
    broker.clock.advance(TIMEOUT_MS)
    assert await broker.tx.check_round() == INTERVAL_MS
    assert checker.asked == []
    broker.clock.advance(1)
    await broker.tx.check_round()
    [(seen, request)] = checker.asked
    # The producer sees its message: real topic and queue, the broker's ids of the copy.
    assert (seen.topic, seen.queue_id, seen.body) == (TOPIC, 1, b"body-U1")
    assert seen.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    assert request.topic == TRANS_HALF_TOPIC
    assert (request.msg_id, request.transaction_id) == ("U1", "U1")
    assert request.tran_state_table_offset == result.queue_offset + 1  # the copy put back
    assert request.commit_log_offset == seen.phy_offset != result.phy_offset
    assert request.offset_msg_id == seen.msg_id

    await broker.answer(request, COMMIT)
    assert [m.uniq_key for m in broker.visible()] == ["U1"]
    # The op resolves the copy answered and the first half.
    assert broker.queue(TRANS_OP_HALF_TOPIC)[0].body == b"1,0,"
    # The producer's own commit comes late, naming the first half: done already, no second
    # message; its rollback would be refused.
    await broker.end(result, COMMIT)
    assert len(broker.visible()) == 1
    with pytest.raises(RequestError):
        await broker.end(result, ROLLBACK)


async def test_the_immunity_time_defers_the_first_check(broker: Broker) -> None:
    checker = checker_of(broker)
    result = await broker.send_half("U1", **{MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: "20"})
    for _ in range(3):
        broker.clock.advance(6_000)
        await broker.tx.check_round()
    assert checker.asked == []  # 18 s
    broker.clock.advance(2_001)
    await broker.tx.check_round()
    [(seen, _)] = checker.asked
    # Put back uncounted while immune, then counted once.
    assert seen.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    assert seen.properties[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] == "0"
    # Past its immunity time the producer's own end is refused: it waits for the check.
    with pytest.raises(RequestError) as refused:
        await broker.end(result, COMMIT)
    assert refused.value.code == ResponseCode.ILLEGAL_OPERATION
    assert broker.visible() == []


async def test_a_shorter_immunity_than_the_timeout_is_the_timeout(broker: Broker) -> None:
    checker = checker_of(broker)
    await broker.send_half("U1", **{MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})
    broker.clock.advance(TIMEOUT_MS)
    await broker.tx.check_round()
    assert checker.asked == []
    broker.clock.advance(1)
    await broker.tx.check_round()
    assert len(checker.asked) == 1


async def test_the_check_goes_to_a_producer_of_the_halfs_group(broker: Broker) -> None:
    other = checker_of(broker, "PG_OTHER", "o1")
    first, second = checker_of(broker, client="c1"), checker_of(broker, client="c2")
    for uniq in ("U1", "U2"):
        await broker.send_half(uniq)
    broker.clock.advance(TIMEOUT_MS + 1)
    await broker.tx.check_round()
    assert other.asked == []
    # Spread over the members of the group.
    assert len(first.asked) == len(second.asked) == 1


async def test_fifteen_unanswered_checks_roll_back(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    checker = checker_of(broker)
    await broker.send_half("U1")
    broker.clock.advance(TIMEOUT_MS + 1)
    for _ in range(15):
        await broker.tx.check_round()
        broker.clock.advance(INTERVAL_MS)
    counts = [seen.properties[MessageConst.TRANSACTION_CHECK_TIMES] for seen, _ in checker.asked]
    assert counts == [str(n) for n in range(1, 16)]
    with caplog.at_level(logging.WARNING, "pocketmq.broker.transaction"):
        await broker.tx.check_round()
    assert len(checker.asked) == 15
    [line] = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
    assert TOPIC in line and "U1" in line and GROUP in line
    assert broker.visible() == []
    [kept] = broker.queue(TRANS_CHECK_MAX_TIME_TOPIC)
    assert kept.uniq_key == "U1"
    # A late answer to the last check does not commit it.
    with pytest.raises(RequestError):
        await broker.answer(checker.asked[-1][1], COMMIT)
    assert broker.visible() == []


async def test_a_check_without_a_live_producer_counts(broker: Broker) -> None:
    await broker.send_half("U1")
    broker.clock.advance(TIMEOUT_MS + 1)
    await broker.tx.check_round()
    broker.clock.advance(INTERVAL_MS)
    checker = checker_of(broker)
    await broker.tx.check_round()
    [(seen, request)] = checker.asked
    assert seen.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "2"
    await broker.answer(request, ROLLBACK)
    assert broker.visible() == []


async def test_a_producer_that_left_is_not_asked(broker: Broker) -> None:
    checker = checker_of(broker)
    broker.producers.unregister(GROUP, "c1")
    await broker.send_half("U1")
    broker.clock.advance(TIMEOUT_MS + 1)
    await broker.tx.check_round()
    assert checker.asked == []


@pytest.mark.parametrize("clean", [True, False])
async def test_a_restart_checks_open_halves_only(broker: Broker, clean: bool) -> None:
    committed = await broker.send_half("C1")
    rolled_back = await broker.send_half("R1")
    await broker.send_half("O1")
    await broker.send_half("K1")
    await broker.end(committed, COMMIT)
    await broker.end(rolled_back, ROLLBACK)
    broker.clock.advance(TIMEOUT_MS + 1)
    checker = checker_of(broker)
    # Checked once before the restart; K1 is then answered (committed), O1 is not.
    await broker.tx.check_round()
    requests = {seen.uniq_key: request for seen, request in checker.asked}
    assert set(requests) == {"O1", "K1"}
    await broker.answer(requests["K1"], COMMIT)
    if clean:
        broker.tx.save_progress()
    broker.offsets.persist()

    broker = broker.restart(clean=clean)
    checker = checker_of(broker)
    broker.clock.advance(INTERVAL_MS)
    await broker.tx.check_round()
    assert [seen.uniq_key for seen, _ in checker.asked] == ["O1"]
    assert checker.asked[0][0].properties[MessageConst.TRANSACTION_CHECK_TIMES] == "2"
    for result in (committed, rolled_back):
        with pytest.raises(RequestError):
            await broker.end(result, COMMIT)
    with pytest.raises(RequestError):
        await broker.answer(requests["K1"], COMMIT)
    assert sorted(m.uniq_key or "" for m in broker.visible()) == ["C1", "K1"]
    await broker.answer(checker.asked[0][1], COMMIT)
    assert sorted(m.uniq_key or "" for m in broker.visible()) == ["C1", "K1", "O1"]
    broker.store.close()


async def test_the_progress_is_kept_as_the_system_groups_offsets(broker: Broker) -> None:
    results = [await broker.send_half(f"U{n}") for n in range(3)]
    await broker.end(results[0], COMMIT)
    await broker.end(results[2], ROLLBACK)
    broker.tx.save_progress()
    # Half 1 is open: the progress stays there; both ops are still needed.
    assert broker.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0) == 1
    assert broker.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0) == 0
    await broker.end(results[1], COMMIT)
    broker.tx.save_progress()
    assert broker.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0) == 3
    assert broker.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0) == 3


async def test_refused_halves(broker: Broker) -> None:
    no_group = broker.half("U1")
    del no_group.properties[MessageConst.PRODUCER_GROUP]
    delayed = broker.half("U2", **{MessageConst.DELAY_TIME_LEVEL: "3"})
    for msg in (no_group, delayed):
        with pytest.raises(RequestError) as refused:
            await broker.messaging.send(msg)
        assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(RequestError) as refused:
        broker.messaging.send_batch([broker.half("U3")])
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert broker.queue(TRANS_HALF_TOPIC) == []


async def test_reject_transaction_message(tmp_path: Path) -> None:
    broker = Broker(tmp_path, FakeClock())
    broker.tx.config = broker.tx.config.replace(reject_transaction_message=True)
    with pytest.raises(RequestError) as refused:
        await broker.send_half("U1")
    assert refused.value.code == ResponseCode.NO_PERMISSION
    broker.store.close()


async def test_an_end_during_a_long_round_is_not_undone(broker: Broker) -> None:
    checker = checker_of(broker)
    results = [await broker.send_half(f"U{n}") for n in range(200)]
    broker.clock.advance(TIMEOUT_MS + 1)
    round_ = asyncio.create_task(broker.tx.check_round())
    await asyncio.sleep(0)  # the round runs up to its first pause for other work
    assert 0 < len(checker.asked) < 200
    await broker.end(results[190], COMMIT)
    await round_
    asked = [seen.uniq_key for seen, _ in checker.asked]
    assert len(asked) == 199 and "U190" not in asked
    assert [m.uniq_key for m in broker.visible()] == ["U190"]
