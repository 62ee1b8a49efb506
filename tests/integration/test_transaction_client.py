"""Transactions with our client over remoting, against `pocketmq serve` as a real process:
commits, rollbacks and a check-back; a dead producer's transaction resolved through another live
producer of its group; a half rolled back after transactionCheckMax unanswered checks; a broker
SIGKILLed with halves pending and resolved.

The broker checks halves older than 300 ms every 100 ms, so that check-backs take a fraction of
a second. "Nothing more happens" is shown with a sentinel: a half left open whose checks count
the check service's passes, so a test waits for passes instead of sleeping.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import FAST_FROM_FIRST, Collector
from server_procs import ServerProcess

from pocketmq.client import (
    LocalTransactionState,
    Message,
    MessageExt,
    PushConsumer,
    TransactionProducer,
    message,
)
from pocketmq.client.ids import client_id
from pocketmq.client.instance import ClientInstance
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient
from waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.integration

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
CHECK_MAX = 15
BROKER_CONF = (
    "transactionTimeOut=300\n"
    "transactionCheckInterval=100\n"
    f"transactionCheckMax={CHECK_MAX}\n"
    "flushConsumerOffsetInterval=200\n"
    # The restart names its broker port; the HA port would then be that port + 1, which any
    # socket may hold (the name server's, an outgoing connection's): any free port instead.
    "haListenPort=0\n"
)
SCRIPT = Path(__file__).parent / "tx_producer_script.py"


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Server:
    """`pocketmq serve` with short transaction timings; restartable on the same ports and
    store after a SIGKILL."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.conf = workdir / "broker.conf"
        self.conf.write_text(BROKER_CONF)
        self.store = workdir / "store"
        self.ports = ("0", "0")
        self.proc = self.start()

    def start(self) -> ServerProcess:
        proc = ServerProcess(
            "serve", self.workdir, "-c", str(self.conf), "--store", str(self.store),
            "--namesrv-port", self.ports[0], "--broker-port", self.ports[1], listen=False,
        )  # fmt: skip
        self.ports = (str(proc.ready["namesrv"]), str(proc.ready["broker"]))
        self.namesrv = f"127.0.0.1:{self.ports[0]}"
        self.broker = f"127.0.0.1:{self.ports[1]}"
        return proc

    def sigkill_and_restart(self) -> None:
        self.proc.proc.send_signal(signal.SIGKILL)
        assert self.proc.stop() == -signal.SIGKILL
        # The dead broker's side of each client connection holds its port (FIN_WAIT2) until
        # the client's loop reads the EOF and closes, and until the new process binds it, an
        # outgoing connection of this process may take it as its local port for a moment.
        for attempt in range(3):
            wait_until_sync(
                lambda: all(_bindable(int(port)) for port in self.ports),
                30, "the killed broker's ports to be free again",
            )  # fmt: skip
            try:
                self.proc = self.start()
                return
            except AssertionError as exc:
                if "address already in use" not in str(exc) or attempt == 2:
                    raise

    def log(self) -> str:
        return self.proc.log_path.read_text()

    async def stored(self, topic: str) -> int:
        """How many messages the topic's queues hold (committed messages, duplicates too)."""
        client = RemotingClient()
        try:
            total = 0
            for queue_id in range(4):  # TBW102's defaultTopicQueueNums
                req = RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}
                )
                total += int((await client.invoke(self.broker, req, 5)).ext_fields["offset"])
            return total
        finally:
            await client.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("tx"))
    try:
        yield s
    finally:
        assert s.proc.stop() == 0, s.log()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return "Tx_" + request.node.name[:60]


class Ledger:
    """The application's side: what each local transaction did (the send's ``arg``) and what a
    check answers for it, by body; counts the checks. Async methods: they run on the loop."""

    def __init__(self) -> None:
        self.on_check: dict[bytes, LocalTransactionState] = {}
        self.checks: Counter[bytes] = Counter()

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        if isinstance(arg, Exception):
            raise arg
        assert isinstance(arg, LocalTransactionState)
        return arg

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checks[msg.body] += 1
        return self.on_check.get(msg.body, UNKNOW)

    async def passes(self, sentinel: bytes, count: int) -> None:
        """Until the sentinel (a half answered UNKNOW) has been checked ``count`` more times:
        the check service has run that many passes since."""
        target = self.checks[sentinel] + count
        await wait_until(
            lambda: self.checks[sentinel] >= target, 20, f"{count} checks of {sentinel!r}"
        )


async def test_commit_rollback_and_a_check_back_deliver_exactly_the_committed(
    shared: Server, topic: str
) -> None:
    ledger = Ledger()
    async with TransactionProducer("PG_TX_A", shared.namesrv, listener=ledger) as producer:
        sent: dict[bytes, LocalTransactionState] = {}
        for i in range(5):
            for body, state in ((b"commit-%d" % i, COMMIT), (b"rollback-%d" % i, ROLLBACK)):
                ledger.on_check[body] = state  # the truth, should a check come first
                result = await producer.send_message_in_transaction(message(topic, body), state)
                assert result.local_transaction_state is state
                sent[body] = state
        ledger.on_check[b"open"] = COMMIT  # undecided at send time, committed when checked
        result = await producer.send_message_in_transaction(
            message(topic, b"open"), RuntimeError("the local database timed out")
        )
        assert result.local_transaction_state is UNKNOW
        await producer.send_message_in_transaction(message(topic, b"sentinel"), UNKNOW)

        collector = Collector()
        consumer = PushConsumer(
            f"CG_{topic}", shared.namesrv, listener=collector, **FAST_FROM_FIRST
        )
        consumer.subscribe(topic)
        async with consumer:
            want = sorted([b for b, s in sent.items() if s is COMMIT] + [b"open"])
            await wait_until(lambda: collector.bodies() == want, 20, "the 5 + 1 committed")
            # Passes of the check service after the check-back: none may commit anything again.
            await ledger.passes(b"sentinel", 3)
            assert collector.bodies() == want
    assert ledger.checks[b"open"] >= 1
    assert await shared.stored(topic) == len(want)  # no duplicate stored either


async def test_a_dead_producers_transaction_is_checked_through_a_live_one(
    shared: Server, topic: str
) -> None:
    group = "PG_TX_DEAD"
    ledger = Ledger()
    ledger.on_check[b"orphan"] = COMMIT
    # The standby never sends: starting announces its group to the broker.
    async with TransactionProducer(group, shared.namesrv, listener=ledger):
        with subprocess.Popen(
            [sys.executable, str(SCRIPT), shared.namesrv, topic, group, "orphan"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ) as dying:  # fmt: skip
            try:
                assert dying.stdout is not None
                opened = json.loads(dying.stdout.readline())  # the half is stored, still open
                assert "open" in opened, opened
            finally:
                dying.kill()  # SIGKILL: no END_TRANSACTION, no unregistering
        collector = Collector()
        consumer = PushConsumer(
            f"CG_{topic}", shared.namesrv, listener=collector, **FAST_FROM_FIRST
        )
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: collector.bodies() == [b"orphan"], 20, "the orphan")
        assert collector.got[0].uniq_key == opened["open"]
    assert ledger.checks[b"orphan"] >= 1  # answered by the live producer
    assert await shared.stored(topic) == 1


async def test_a_half_never_answered_is_rolled_back_after_the_last_check(
    shared: Server, topic: str
) -> None:
    ledger = Ledger()
    async with TransactionProducer("PG_TX_MAX", shared.namesrv, listener=ledger) as producer:
        result = await producer.send_message_in_transaction(message(topic, b"undecided"), UNKNOW)
        await wait_until(
            lambda: ledger.checks[b"undecided"] >= CHECK_MAX, 20, f"{CHECK_MAX} checks"
        )
        await producer.send_message_in_transaction(message(topic, b"sentinel"), UNKNOW)
        await ledger.passes(b"sentinel", 3)
        # Rolled back: never checked again.
        assert ledger.checks[b"undecided"] == CHECK_MAX
        ledger.on_check[b"sentinel"] = ROLLBACK
        await ledger.passes(b"sentinel", 1)
    assert await shared.stored(topic) == 0
    assert result.transaction_id in shared.log()  # the broker says it rolled it back


async def test_a_broker_sigkill_keeps_pending_halves_pending_and_resolved_ones_resolved(
    tmp_path: Path, topic: str
) -> None:
    server = Server(tmp_path)
    ledger = Ledger()
    # Heartbeats every 200 ms: the restarted broker must learn of the producer to check it.
    instance = ClientInstance(server.namesrv, client_id("tx-sigkill"), heartbeat_interval_s=0.2)
    producer = TransactionProducer("PG_TX_KILL", listener=ledger, instance=instance)
    try:
        await producer.start()
        outcomes = {b"commit-%d" % i: COMMIT for i in range(3)}
        outcomes |= {b"rollback-%d" % i: ROLLBACK for i in range(2)}
        outcomes |= {b"pending-%d" % i: UNKNOW for i in range(2)}
        for body, state in outcomes.items():
            if state is not UNKNOW:
                ledger.on_check[body] = state
            await producer.send_message_in_transaction(message(topic, body), state)
        await wait_until(
            lambda: all(ledger.checks[b"pending-%d" % i] >= 1 for i in range(2)),
            20, "the pending halves to be checked once before the kill",
        )  # fmt: skip
        await wait_until(lambda: _stored_is(server, topic, 3), 20, "the 3 commits stored")

        # Off the loop: the producer's connections must see the kill and close meanwhile. A
        # blocked loop leaves the dead broker's side of them in FIN_WAIT2, which keeps its
        # port from being bound again (EADDRINUSE despite SO_REUSEADDR).
        await asyncio.to_thread(server.sigkill_and_restart)
        for i in range(2):
            ledger.on_check[b"pending-%d" % i] = COMMIT
        await producer.send_message_in_transaction(message(topic, b"sentinel"), UNKNOW)
        collector = Collector()
        consumer = PushConsumer(
            f"CG_{topic}", server.namesrv, listener=collector, **FAST_FROM_FIRST
        )
        consumer.subscribe(topic)
        async with consumer:
            want = sorted(b for b, s in outcomes.items() if s is not ROLLBACK)
            await wait_until(lambda: collector.bodies() == want, 30, "commits and checked ones")
            await ledger.passes(b"sentinel", 3)
            assert collector.bodies() == want
        assert await server.stored(topic) == len(want)
    finally:
        await producer.shutdown()
        await instance.close()
        assert server.proc.stop() == 0, server.log()


async def _stored_is(server: Server, topic: str, count: int) -> bool:
    return await server.stored(topic) == count


def test_the_orders_example_announces_exactly_the_saved_orders(shared: Server) -> None:
    example = Path(__file__).parent.parent.parent / "examples" / "transactions" / "orders.py"
    run = subprocess.run(
        [sys.executable, str(example), "--namesrv", shared.namesrv, "--orders", "10",
         "--wait", "30"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    # Orders 4 and 8 lost their answer and were committed by the check; 5 and 10 rolled back.
    assert run.stdout.count("broker checks") >= 2
    assert "8 orders announced, 8 saved; missing []" in run.stdout
