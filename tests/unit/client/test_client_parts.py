"""The client's pure parts, checked against RocketMQ's behaviour: queue allocation, queue
selection with latency fault tolerance, message ids, routes, subscriptions,
process queues and local offsets."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import struct
import time
from pathlib import Path

import pytest

from pocketmq.client.allocate import allocate_averagely, allocate_by_circle
from pocketmq.client.fault import QueueSelector
from pocketmq.client.ids import UniqueIdGenerator
from pocketmq.client.offset_store import LocalOffsetStore
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.producer import message, select_by_hash
from pocketmq.client.pull import Subscription
from pocketmq.client.route import MessageQueue, TopicRoute
from pocketmq.errors import ClientError
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.properties import tags_code


def queues(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


@pytest.mark.parametrize(
    ("n_mq", "n_cid", "expected"),
    [
        # AllocateMessageQueueAveragely: contiguous ranges, the first len % n clients get more.
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (4, 2, [[0, 1], [2, 3]]),
        (5, 2, [[0, 1, 2], [3, 4]]),
        (2, 3, [[0], [1], []]),
        (4, 1, [[0, 1, 2, 3]]),
    ],
)
def test_allocate_averagely(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    cids = [f"c{i}" for i in range(n_cid)]
    got = [[mq.queue_id for mq in allocate_averagely("G", c, queues(n_mq), cids)] for c in cids]
    assert got == expected


def test_allocations_cover_every_queue_once() -> None:
    for n_mq in range(1, 13):
        for n_cid in range(1, 6):
            cids = [f"c{i}" for i in range(n_cid)]
            for strategy in (allocate_averagely, allocate_by_circle):
                taken = [mq for c in cids for mq in strategy("G", c, queues(n_mq), cids)]
                assert sorted(taken) == queues(n_mq)
    assert allocate_averagely("G", "stranger", queues(4), ["c0"]) == []


def test_queue_order_is_javas() -> None:
    mqs = [MessageQueue("B", "a", 0), MessageQueue("A", "b", 1), MessageQueue("A", "a", 2)]
    assert sorted(mqs) == [mqs[2], mqs[1], mqs[0]]


def test_round_robin_and_retry_skips_the_failed_broker() -> None:
    sel = QueueSelector()
    mqs = queues(2, "a") + queues(2, "b")
    picked = [sel.select(mqs, None) for _ in range(8)]
    assert {mq for mq in picked} == set(mqs)  # every queue in turn
    assert all(sel.select(mqs, "a").broker_name == "b" for _ in range(10))
    assert sel.select(queues(2, "a"), "a").broker_name == "a"  # nothing else to pick


def test_not_available_durations_follow_the_seed_tables() -> None:
    sel = QueueSelector(send_latency_fault_enable=True)
    assert sel.not_available_duration(30000) == 600000  # isolation: ten minutes
    assert sel.not_available_duration(3000) == 180000
    assert sel.not_available_duration(600) == 30000
    assert sel.not_available_duration(100) == 0
    assert sel.not_available_duration(10) == 0


def test_fault_tolerance_avoids_a_failed_broker_until_it_is_back() -> None:
    sel = QueueSelector(send_latency_fault_enable=True)
    mqs = queues(4, "a") + queues(4, "b")
    sel.update_fault_item("a", 3, isolation=True)
    assert all(sel.select(mqs, None).broker_name == "b" for _ in range(20))
    sel.update_fault_item("a", 20, isolation=False)  # a fast answer: available at once
    assert {sel.select(mqs, None).broker_name for _ in range(20)} == {"a", "b"}


def test_fault_tolerance_picks_the_least_bad_when_all_failed() -> None:
    sel = QueueSelector(send_latency_fault_enable=True)
    mqs = queues(2, "a") + queues(2, "b")
    sel.update_fault_item("a", 3000, isolation=False)
    sel.update_fault_item("b", 30000, isolation=True)
    assert sel.select(mqs, None).broker_name == "a"


def test_fault_tolerance_off_records_nothing() -> None:
    sel = QueueSelector()
    sel.update_fault_item("a", 1, isolation=True)
    assert sel.fault.items == {}


def test_message_id_layout() -> None:
    gen = UniqueIdGenerator("10.1.2.3")
    ids = [gen.next_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    raw = bytes.fromhex(ids[0])
    assert len(raw) == 16 and ids[0] == ids[0].upper()
    assert socket.inet_ntoa(raw[:4]) == "10.1.2.3"
    assert struct.unpack(">H", raw[4:6])[0] == os.getpid() & 0xFFFF
    diff_ms = struct.unpack(">I", raw[10:14])[0]
    now = dt.datetime.now()
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert abs(month_start.timestamp() * 1000 + diff_ms - time.time() * 1000) < 5000
    counters = [struct.unpack(">H", bytes.fromhex(i)[14:])[0] for i in ids[:2]]
    assert (counters[1] - counters[0]) % 65536 == 1


def test_select_by_hash_uses_javas_string_hash() -> None:
    mqs = queues(4)
    # Java: "order-1".hashCode() == -1207111310, and abs(-1207111310 % 4) == 2.
    assert select_by_hash(mqs, message("T", b"x"), "order-1").queue_id == 2
    assert select_by_hash(mqs, message("T", b"x"), 7).queue_id == 3


def test_route_keeps_writable_queues_of_brokers_with_a_master() -> None:
    data = {
        "brokerDatas": [
            {"brokerName": "a", "brokerAddrs": {"0": "h:1"}},
            {"brokerName": "b", "brokerAddrs": {"1": "h:2"}},  # slave only
            {"brokerName": "c", "brokerAddrs": {"0": "h:3"}},
        ],
        "queueDatas": [
            {"brokerName": "c", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4},
            {"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
            {"brokerName": "a", "readQueueNums": 2, "writeQueueNums": 1, "perm": 6},
        ],
    }
    route = TopicRoute.from_json("T", data)
    assert route.write_queues == [MessageQueue("T", "a", 0)]
    assert sorted(route.read_queues) == [
        MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0),
        MessageQueue("T", "c", 0), MessageQueue("T", "c", 1),
    ]  # fmt: skip
    assert route.master("a") == "h:1" and route.master("b") is None


def test_subscription_expressions() -> None:
    sub = Subscription.parse("T", " TagA || TagB ||  ")
    assert sub.tags == {"TagA", "TagB"}
    data = sub.to_json()
    assert data["tagsSet"] == ["TagA", "TagB"]
    assert data["codeSet"] == [tags_code("TagA"), tags_code("TagB")]
    assert Subscription.parse("T", "*").tags == frozenset()
    assert Subscription.parse("T", None).expression == "*"
    with pytest.raises(ClientError):
        Subscription.parse("T", "||")
    tagged = MessageExt("T", b"", properties={"TAGS": "TagB"})
    assert sub.matches(tagged)
    assert not sub.matches(MessageExt("T", b""))


def test_process_queue_commits_the_lowest_unconsumed_offset() -> None:
    async def main() -> None:
        pq = ProcessQueue(MessageQueue("T", "b", 0), 0)
        msgs = [MessageExt("T", b"x", queue_offset=i) for i in range(5, 10)]
        assert pq.remove(msgs) == -1  # nothing held
        pq.put(msgs)
        assert pq.remove([msgs[1], msgs[2]]) == 5  # 5 still in flight
        assert pq.remove([msgs[0]]) == 8
        assert pq.remove([msgs[3], msgs[4]]) == 10  # all done: after the highest
        assert pq.size_bytes == 0

    asyncio.run(main())


def test_local_offset_store_round_trip(tmp_path: Path) -> None:
    async def main() -> None:
        store = LocalOffsetStore(tmp_path, "10.0.0.1@1#2", "G")
        mq = MessageQueue("T", "b", 3)
        store.update(mq, 42, increase_only=True)
        store.update(mq, 40, increase_only=True)  # never backwards when increase_only
        await store.persist_all([mq])
        again = LocalOffsetStore(tmp_path, "10.0.0.1@1#2", "G")
        await again.load()
        assert await again.read_from_store(mq) == 42
        assert await again.read_from_store(MessageQueue("T", "b", 0)) == -1
        # A queue taken again drops what memory held; the file still says where to resume.
        again.remove(mq)
        assert await again.read_from_store(mq) == 42
        assert again.offsets[mq] == 42
        again.path.write_text("[1, 2")
        again.path.with_name("offsets.json.bak").unlink(missing_ok=True)
        with pytest.raises(ClientError, match="offsets"):
            await LocalOffsetStore(tmp_path, "10.0.0.1@1#2", "G").load()

    asyncio.run(main())


def test_process_queue_flow_control_counts_messages_and_bytes() -> None:
    async def main() -> None:
        pq = ProcessQueue(MessageQueue("T", "b", 0), 0)
        msgs = [MessageExt("T", b"12345", queue_offset=i) for i in range(3)]
        pq.put(msgs)
        assert pq.is_full(3, 1 << 20) and pq.is_full(10, 15) and not pq.is_full(4, 16)
        waiter = asyncio.ensure_future(pq.wait_for_space())
        await asyncio.sleep(0)
        assert not waiter.done()
        pq.remove(msgs[:1])  # consumption frees space: the pull resumes
        await waiter
        assert not pq.is_full(3, 15)

    asyncio.run(main())
