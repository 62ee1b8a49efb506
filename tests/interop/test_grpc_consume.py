"""Interop: the unmodified official 5.x client (``rocketmq-python-client==5.1.2``, gRPC)
consuming from ``pocketmq serve`` (POP: ReceiveMessage, AckMessage, ChangeInvisibleDuration,
QueryAssignment, ForwardMessageToDeadLetterQueue).

The client runs in a subprocess (grpc_consumer_script.py) driven line by line over stdin/stdout
with JSON, so that each step can wait on the last one; what it received comes back with its
times, delivery attempts, message ids, tags, keys and properties. Dead-letter queues are read
with our 4.x client, as RocketMQ users do. Checked:

- SimpleConsumer: receive + ack (an acked message never comes back), the tag filter, a
  SQL92 filter (exactly the matching messages; a malformed one refused with
  ILLEGAL_FILTER_EXPRESSION);
- an unacked message comes back after its invisible duration as attempt 2; a stale or expired
  receipt handle is refused; ChangeInvisibleDuration moves the deadline;
- retryMaxTimes + 1 deliveries, then ``%DLQ%{group}`` holds the message;
- PushConsumer, concurrent group: retries on the server's customized backoff (the delay-level
  ladder) with a growing delivery attempt, then the DLQ;
- PushConsumer, FIFO group: each message group in send order, one message at a time; a failing
  message retried by the client at the group's fixed interval, then forwarded to the DLQ;
- in-flight messages survive a SIGKILL of the server and come back after their deadline;
- a message from our 4.x producer keeps its tag, keys, properties and id for the 5.x consumer.

A new group starts at the end of each queue (ConsumeInitMode.MAX), so every test makes its
consumer receive once (a SimpleConsumer) or consume a warm-up message (a PushConsumer) before
producing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from grpc_consumer_driver import (
    Client,
    Got,
    Serve,
    create_topic,
    read_dlq,
    receive,
    receive_for,
    receive_until,
    set_group,
)

from pocketmq.client import MessageExt
from pocketmq.client import Producer as RemotingProducer
from pocketmq.client import message as remoting_message
from pocketmq.protocol.message import MessageConst

pytestmark = [pytest.mark.interop, pytest.mark.slow]

if importlib.util.find_spec("rocketmq") is None:
    pytest.skip("rocketmq-python-client is not installed", allow_module_level=True)

# The retry ladder pushed to concurrent consumers starts at level 3; the 5.1.2 client reads
# whole seconds only, so 1 s, 2 s, 3 s ... keeps retries short.
LEVELS_S = [1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
LADDER_S = LEVELS_S[2:]
# Invisible durations of 1-5 s need a smaller floor than RocketMQ's 10 s.
BROKER_CONF = (
    "messageDelayLevel=" + " ".join(f"{s}s" for s in LEVELS_S) + "\n"
    "minInvisibleTimeMillsForRecv=1000\n"
)
AWAIT_S = 2  # the SimpleConsumer's long polling timeout
# Server times are whole milliseconds; our timestamps are floats of the same clock.
SLACK_S = 0.05
FIFO_INTERVAL_S = 1  # the fixed retry interval of FIFO groups


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, BROKER_CONF)
    try:
        yield server
    finally:
        assert server.proc.stop() == 0, server.log()


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Callable[[str], Client]]:
    started: list[Client] = []

    def start(endpoint: str) -> Client:
        client = Client(tmp_path, endpoint, f"client{len(started) + 1}")
        started.append(client)
        return client

    try:
        yield start
    finally:
        for client in started:
            client.close()


def start_simple(
    client: Client, group: str, topic: str, expr: str = "*", *, sql: bool = False
) -> None:
    client.ok("producer", topics=[topic])
    client.ok("simple", group=group, topic=topic, expr=expr, await_s=AWAIT_S, sql=sql)
    # The group's first pop puts it at the end of every queue; produce only after it.
    assert receive(client, invisible_s=5) == []


def push_warm_up(client: Client, topic: str, *, fifo: bool, tag: str = "TagA") -> None:
    """Send warm-up messages until the push consumer has consumed one: it is polling, and the
    group's place in every queue is set."""
    for i in range(15):
        spec: dict[str, Any] = {"topic": topic, "body": f"warmup-{i}", "tag": tag}
        if fifo:
            spec["group"] = "warmup"
        client.ok("send", messages=[spec])
        if client.until(
            lambda events: any(e["message"]["body"].startswith("warmup") for e in events
                               if e.get("event") == "consume"),
            2,
        ):  # fmt: skip
            return
    raise AssertionError("the push consumer consumed no warm-up message" + client.diagnostics())


def uniq_key(msg: MessageExt) -> str | None:
    return msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


# ---------------------------------------------------------------------- SimpleConsumer


def test_simple_consumer_receives_acks_and_filters_tags(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "SimpleTopic", "CG_SIMPLE"
    create_topic(serve, topic)
    client = clients(serve.grpc)
    start_simple(client, group, topic, "TagA || TagB")

    specs = [
        {"topic": topic, "body": f"m{i}", "tag": ("TagA", "TagB", "TagC")[i % 3],
         "keys": [f"k{i}", f"kk{i}"], "props": {"n": str(i), "color": "blue"}}
        for i in range(12)
    ]  # fmt: skip
    ids = client.ok("send", messages=specs)["ids"]
    wanted = {ids[i]: s for i, s in enumerate(specs) if s["tag"] != "TagC"}

    acked_at = 0.0
    got: list[Got] = []
    deadline = time.monotonic() + 30
    while len(got) < len(wanted):
        assert time.monotonic() < deadline, f"received only {got}"
        batch = receive(client, invisible_s=3)
        for m in batch:  # acked at once, well inside the 3 s
            client.ok("ack", msg_id=m["id"])
        acked_at = time.time()
        got += batch
    assert sorted(m["id"] for m in got) == sorted(wanted)
    for m in got:
        spec = wanted[m["id"]]
        assert (m["topic"], m["body"], m["tag"], m["attempt"]) == (
            topic, spec["body"], spec["tag"], 1
        ), m  # fmt: skip
        assert m["keys"] == sorted(spec["keys"]) and m["props"] == spec["props"], m
        assert m["handle"] and not m["corrupted"], m

    # Acked: nothing comes back once the 3 s invisible duration is over, and no TagC ever.
    again = receive_for(client, acked_at + 3 + 2 - time.time(), invisible_s=3)
    assert again == [], again


def test_simple_consumer_with_a_sql92_filter_receives_exactly_the_matching_messages(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "SqlTopic", "CG_SQL"
    create_topic(serve, topic)
    client = clients(serve.grpc)
    selector = "n >= 4 AND (color = 'blue' OR TAGS = 'TagC') AND skip IS NULL"
    start_simple(client, group, topic, selector, sql=True)

    specs = []
    for i in range(16):
        props = {"n": str(i), "color": "blue" if i % 2 else "red"}
        if i % 5 == 0:
            props["skip"] = "yes"
        specs.append({"topic": topic, "body": f"m{i}", "tag": ("TagA", "TagC")[i % 4 == 0],
                      "props": props})  # fmt: skip
    ids = client.ok("send", messages=specs)["ids"]
    wanted = {
        ids[i] for i in range(16)
        if i >= 4 and (i % 2 or i % 4 == 0) and i % 5
    }  # fmt: skip
    got: list[Got] = []
    deadline = time.monotonic() + 30
    while len(got) < len(wanted):
        assert time.monotonic() < deadline, f"received only {got}"
        batch = receive(client, invisible_s=3)
        for m in batch:
            client.ok("ack", msg_id=m["id"])
        got += batch
    assert sorted(m["id"] for m in got) == sorted(wanted)
    # Nothing else comes: the other messages were never delivered.
    assert receive_for(client, 3, invisible_s=3) == []

    bad = clients(serve.grpc)
    bad.ok("simple", group="CG_SQL_BAD", topic=topic, expr="n >", await_s=AWAIT_S, sql=True)
    refused = bad.call("receive", max_num=8, invisible_s=3)
    assert refused.get("code") == "ILLEGAL_FILTER_EXPRESSION", refused


def test_unacked_message_comes_back_after_invisible_duration_and_changes_extend_it(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "InvisibleTopic", "CG_INVISIBLE"
    create_topic(serve, topic)
    client = clients(serve.grpc)
    start_simple(client, group, topic)
    ids = client.ok("send", messages=[
        {"topic": topic, "body": "left", "tag": "TagA"},
        {"topic": topic, "body": "changed", "tag": "TagA"},
    ])["ids"]  # fmt: skip
    left_id, changed_id = ids

    first = receive_until(client, lambda g: len(g) >= 2, invisible_s=3, timeout_s=15)
    assert sorted(m["id"] for m in first) == sorted(ids) and all(m["attempt"] == 1 for m in first)
    left, changed = (next(m for m in first if m["id"] == i) for i in ids)

    # "changed": five more seconds from now; its first handle is then stale.
    change = client.ok("change", msg_id=changed_id, invisible_s=5)
    assert change["old_handle"] == changed["handle"] and change["handle"] not in (
        "", changed["handle"]
    ), change  # fmt: skip
    stale = client.call("ack", msg_id=changed_id, handle=changed["handle"])
    assert stale.get("code") == "INVALID_RECEIPT_HANDLE", stale

    # "left" comes back after its 3 s as attempt 2, the same message; "changed" not before 5 s.
    got = receive_until(
        client, lambda g: {m["id"] for m in g} >= set(ids), invisible_s=5, timeout_s=20
    )
    assert sorted(m["id"] for m in got) == sorted(ids), got  # one redelivery each
    left2, changed2 = (next(m for m in got if m["id"] == i) for i in ids)
    assert (left2["attempt"], left2["body"], left2["topic"]) == (2, "left", topic), left2
    assert left2["at"] >= left["sent_at"] + 3 - SLACK_S, (left, left2)
    assert left2["handle"] != left["handle"]
    assert (changed2["attempt"], changed2["body"]) == (2, "changed"), changed2
    assert changed2["at"] >= change["sent_at"] + 5 - SLACK_S, (change, changed2)

    # The expired first handle of "left" is refused; the current ones are taken.
    expired = client.call("ack", msg_id=left_id, handle=left["handle"])
    assert expired.get("code") == "INVALID_RECEIPT_HANDLE", expired
    client.ok("ack", msg_id=left_id)
    client.ok("ack", msg_id=changed_id)
    assert receive_for(client, 5 + 1, invisible_s=5) == []


def test_simple_consumer_dead_letters_after_max_deliveries(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "DeadLetterTopic", "CG_SIMPLE_DLQ"
    create_topic(serve, topic)
    set_group(serve, group, retry_max_times=1)  # two deliveries
    client = clients(serve.grpc)
    start_simple(client, group, topic)
    [doomed_id] = client.ok("send", messages=[
        {"topic": topic, "body": "doomed", "tag": "TagD", "keys": ["dk"]},
    ])["ids"]  # fmt: skip

    got = receive_until(client, lambda g: len(g) >= 2, invisible_s=1, timeout_s=20)
    assert [(m["id"], m["attempt"]) for m in got] == [(doomed_id, 1), (doomed_id, 2)], got
    assert got[1]["at"] >= got[0]["sent_at"] + 1 - SLACK_S
    # Once the second delivery's second is over, the next pop sends it to the DLQ instead.
    assert receive_for(client, 1 + 3, invisible_s=1) == []

    [dead] = read_dlq(serve, group)
    assert dead.body == b"doomed" and uniq_key(dead) == doomed_id, dead
    assert dead.tags == "TagD" and dead.keys == "dk", dead.properties


# ---------------------------------------------------------------------- PushConsumer


def test_push_consumer_retries_on_the_ladder_then_dead_letters(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "PushTopic", "CG_PUSH"
    create_topic(serve, topic)
    set_group(serve, group, retry_max_times=2)  # three deliveries
    client = clients(serve.grpc)
    client.ok("producer", topics=[topic])
    started = client.ok("push", group=group, topic=topic, expr="TagA || TagB",
                        fail={"poison": -1})  # fmt: skip
    assert started["fifo"] is False
    push_warm_up(client, topic, fifo=False)

    specs = [
        {"topic": topic, "body": f"m{i}", "tag": ("TagA", "TagB", "TagC")[i % 3],
         "keys": [f"k{i}"], "props": {"n": str(i)}}
        for i in range(15)
    ] + [{"topic": topic, "body": "poison", "tag": "TagA"}]  # fmt: skip
    ids = client.ok("send", messages=specs)["ids"]
    poison_id = ids[-1]
    wanted = {ids[i]: s for i, s in enumerate(specs[:-1]) if s["tag"] != "TagC"}

    def poison(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e.get("event") == "consume"
                and e["message"]["id"] == poison_id]  # fmt: skip

    def done(events: list[dict[str, Any]]) -> bool:
        ok = {e["message"]["id"] for e in events if e.get("result") == "SUCCESS"}
        return ok >= set(wanted) and len(poison(events)) >= 3

    client.wait_events(done, timeout_s=40)
    [dead] = read_dlq(serve, group)  # after the third failure and its 3 s
    events = client.consumed()

    tests = [e for e in events if not e["message"]["body"].startswith("warmup")]
    normal = [e for e in tests if e["message"]["id"] != poison_id]
    assert sorted(e["message"]["id"] for e in normal) == sorted(wanted), normal  # once each
    for e in normal:
        m, spec = e["message"], wanted[e["message"]["id"]]
        assert e["result"] == "SUCCESS" and m["attempt"] == 1, e
        assert (m["topic"], m["body"], m["tag"], m["keys"], m["props"]) == (
            topic, spec["body"], spec["tag"], spec["keys"], spec["props"]
        ), e  # fmt: skip

    # Three deliveries, each after the previous failure plus the ladder's step, then the DLQ.
    calls = poison(events)
    assert [(c["message"]["attempt"], c["result"]) for c in calls] == [
        (1, "FAILURE"), (2, "FAILURE"), (3, "FAILURE")
    ], calls  # fmt: skip
    assert all(c["message"]["topic"] == topic and c["message"]["body"] == "poison" for c in calls)
    for step, (a, b) in zip(LADDER_S, itertools.pairwise(calls), strict=False):
        assert b["start"] >= a["end"] + step - SLACK_S, (step, a, b)
    assert dead.body == b"poison" and uniq_key(dead) == poison_id, dead


def test_fifo_push_consumer_keeps_group_order_and_dead_letters_a_failing_message(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "FifoTopic", "CG_FIFO"
    create_topic(serve, topic)
    set_group(serve, group, retry_max_times=2, orderly=True)  # three attempts
    client = clients(serve.grpc)
    client.ok("producer", topics=[topic])
    started = client.ok("push", group=group, topic=topic, expr="*", fail={"g1:3": -1},
                        work_s=0.05)  # fmt: skip
    assert started["fifo"] is True
    push_warm_up(client, topic, fifo=True)

    groups, per_group = 4, 6
    ids: dict[str, str] = {}

    def send(seqs: range) -> None:
        specs = [
            {"topic": topic, "body": f"g{g}:{s}", "tag": "TagF", "group": f"g{g}"}
            for s in seqs for g in range(groups)
        ]  # fmt: skip
        sent = client.ok("send", messages=specs)["ids"]
        ids.update(zip((s["body"] for s in specs), sent, strict=True))

    def calls_of(body: str, events: list[dict[str, Any]]) -> int:
        return sum(e.get("event") == "consume" and e["message"]["body"] == body for e in events)

    # The rest is sent while the client retries g1:3: the server must hold g1's queue until
    # g1:3 is resolved, or g1:4 would be consumed beside it.
    send(range(4))
    client.wait_events(lambda events: calls_of("g1:3", events) >= 1, timeout_s=20)
    send(range(4, per_group))

    def done(events: list[dict[str, Any]]) -> bool:
        ok = {e["message"]["body"] for e in events if e.get("result") == "SUCCESS"}
        return ok >= set(ids) - {"g1:3"} and calls_of("g1:3", events) >= 3

    client.wait_events(done, timeout_s=40)
    [dead] = read_dlq(serve, group)
    events = [e for e in client.consumed() if not e["message"]["body"].startswith("warmup")]

    for g in range(groups):
        calls = sorted((e for e in events if e["message"]["group"] == f"g{g}"),
                       key=lambda e: e["start"])  # fmt: skip
        bodies = [e["message"]["body"] for e in calls]
        expected = [f"g{g}:{s}" for s in range(per_group)]
        if g == 1:  # three attempts, then the next one
            expected[3:4] = ["g1:3"] * 3
        assert bodies == expected, (g, calls)
        for a, b in itertools.pairwise(calls):  # one at a time
            assert b["start"] >= a["end"], (a, b)
        assert all(e["message"]["id"] == ids[e["message"]["body"]] for e in calls)
        assert all(e["message"]["topic"] == topic and e["message"]["tag"] == "TagF"
                   for e in calls)  # fmt: skip

    failing = [e for e in events if e["message"]["body"] == "g1:3"]
    assert [e["result"] for e in failing] == ["FAILURE"] * 3
    # The client retries locally: the server's delivery attempt stays 1, and the attempts are
    # the FIFO group's fixed interval apart.
    assert all(e["message"]["attempt"] == 1 for e in failing), failing
    for a, b in itertools.pairwise(failing):
        assert b["start"] >= a["end"] + FIFO_INTERVAL_S - SLACK_S, (a, b)
    assert all(e["result"] == "SUCCESS" and e["message"]["attempt"] == 1
               for e in events if e["message"]["body"] != "g1:3")  # fmt: skip
    assert dead.body == b"g1:3" and uniq_key(dead) == ids["g1:3"], dead
    assert dead.properties.get(MessageConst.SHARDING_KEY) == "g1", dead.properties


# ---------------------------------------------------------------------- restart, 4.x -> 5.x


def test_in_flight_messages_survive_a_killed_server(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "RestartTopic", "CG_RESTART"
    invisible_s = 5
    create_topic(serve, topic)
    client = clients(serve.grpc)
    start_simple(client, group, topic)
    ids = client.ok("send", messages=[
        {"topic": topic, "body": f"inflight-{i}", "tag": "TagR"} for i in range(3)
    ])["ids"]  # fmt: skip
    first = receive_until(client, lambda g: len(g) >= 3, invisible_s=invisible_s, timeout_s=15)
    assert sorted(m["id"] for m in first) == sorted(ids), first

    assert serve.kill() == -signal.SIGKILL
    serve.restart()
    # The same client, reconnecting: each comes back once, as attempt 2, after its deadline.
    got = receive_until(
        client, lambda g: {m["id"] for m in g} >= set(ids), invisible_s=30, timeout_s=40,
        tolerate_errors=True,
    )  # fmt: skip
    assert sorted(m["id"] for m in got) == sorted(ids), got
    for m in got:
        [before] = [f for f in first if f["id"] == m["id"]]
        assert (m["attempt"], m["body"]) == (2, before["body"]), m
        assert m["at"] >= before["sent_at"] + invisible_s - SLACK_S, (before, m)
        client.ok("ack", msg_id=m["id"])


def test_remoting_producer_to_grpc_simple_consumer(
    serve: Serve, clients: Callable[[str], Client]
) -> None:
    topic, group = "CrossTopic", "CG_CROSS"
    create_topic(serve, topic)
    client = clients(serve.grpc)
    start_simple(client, group, topic)

    sent = [
        ("plain", None, None, {}),
        ("tagged", "TagX", ["order-1", "order-2"], {"color": "red", "size": "L"}),
        ("keyed", "TagY", ["only"], {"a": "1"}),
    ]

    async def produce() -> list[str]:
        async with RemotingProducer("PG_CROSS", serve.namesrv) as producer:
            return [
                (await producer.send(
                    remoting_message(topic, body, tags=tag, keys=keys, properties=props)
                )).msg_id
                for body, tag, keys, props in sent
            ]  # fmt: skip

    ids = asyncio.run(produce())
    got = receive_until(client, lambda g: len(g) >= 3, invisible_s=10, timeout_s=15)
    by_id = {m["id"]: m for m in got}
    assert sorted(by_id) == sorted(ids), got
    for msg_id, (body, tag, keys, props) in zip(ids, sent, strict=True):
        m = by_id[msg_id]
        assert (m["topic"], m["body"], m["tag"], m["keys"], m["props"], m["attempt"]) == (
            topic, body, tag, sorted(keys or []), props, 1
        ), m  # fmt: skip
        assert not m["corrupted"] and m["born_timestamp"], m
        client.ok("ack", msg_id=msg_id)
