"""The edge fuzzers' targets: each takes one input from fuzz_inputs.py and raises
AssertionError (or lets an unexpected exception escape) when the input breaks a property.
Shared by the short run in the test suite (test_fuzz_edges.py) and the run of 10^6 inputs
(bench/fuzz_edges.py).

- ``codec_target``: bytes in any splits through ``RemotingConnection`` give commands or
  RemoteProtocolError, and every command decoded can be answered (its response encodes).
- ``BrokerHarness.remoting_target``: a request into the broker's Dispatcher gets a response or
  a RequestError, never another exception or a hang; the code is a RocketMQ code; the tables
  stay persistable and hold only what the edge validators accept; a refused request changes
  no table (beyond the topics and groups RocketMQ itself creates on first use).
- ``BrokerHarness.grpc_target``: a v2 request into MessagingService, with a fake context, gets
  responses carrying a Status, never an exception or a hang; the tables stay valid.

The broker runs in-process on a temporary store with tiny files; its tables are put back to a
baseline before each input, so that one input's effects cannot change another's outcome.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import signal
import traceback
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import orjson
from fuzz_inputs import GROUPS, TOPICS, GrpcCall, send_fields
from google.protobuf.message import Message as ProtoMessage

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.locks import RebalanceLockManager
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.broker.topics import TopicConfig
from pocketmq.errors import RemoteProtocolError, RequestError
from pocketmq.grpc.server import MessagingService
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.connection import NEED_DATA, RemotingConnection
from pocketmq.protocol.names import REVIVE_GROUP
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel
from pocketmq.store.config import StoreConfig

# A request not answered within this long is a hang (the channel is closed, so no long poll
# may wait, and the gRPC context has no time left).
HANG_S = 5.0
# An event loop that runs nothing else for this long is blocked (a task that never awaits).
BLOCKED_S = 2 * HANG_S


T = TypeVar("T")


class Blocked(AssertionError):
    """The event loop was blocked: the broker answered nobody. The harness is broken after it
    (the blocking task was interrupted)."""


def codec_target(data: bytes, splits: list[int]) -> int:
    """Feed data in splits; returns the commands decoded.

    Raises:
        AssertionError: a decoded command cannot be answered.
        Exception: anything but RemoteProtocolError escaping the codec is a finding.
    """
    conn = RemotingConnection(max_frame=4096)
    decoded = pos = 0
    try:
        for step in [*splits, len(data)]:
            conn.receive_data(data[pos : pos + step])
            pos += step
            while (cmd := conn.next_command()) is not NEED_DATA:
                assert isinstance(cmd, RemotingCommand)
                decoded += 1
                # The channel answers every request it decodes, even one it refuses.
                cmd.response(ResponseCode.SYSTEM_ERROR, "refused").encode()
    except RemoteProtocolError:
        pass
    return decoded


# ------------------------------------------------------------------ the broker


NOT_REFUSED = frozenset({
    ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
    ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.QUERY_NOT_FOUND,
})  # fmt: skip
# Requests that may create topics on first use even when refused afterwards (RocketMQ creates
# a topic in msgCheck before checking the queue id, or a reply's requester, and retry / DLQ
# topics on demand).
CREATES_TOPICS = frozenset({
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.HEART_BEAT, RequestCode.SEND_REPLY_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE_V2,
})  # fmt: skip


@dataclass(frozen=True)
class Tables:
    """What a request may change: topic configs, offsets, subscription groups."""

    topics: dict[str, Any]
    offsets: dict[str, dict[int, int]]
    groups: dict[str, Any]


class _CaughtExceptions(logging.Handler):
    """Keeps the exceptions logged at a task boundary (logged with their traceback)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.caught: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.caught.append(record.exc_info[1])


def _client_offsets(table: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
    """The offsets clients commit: the POP revive service keeps its own under its group,
    changing them in the background."""
    return {k: dict(v) for k, v in table.items() if k.partition("@")[2] != REVIVE_GROUP}


class BrokerHarness:
    """A real Broker (and its gRPC servicer) on tmp_path, driven from a private event loop."""

    def __init__(self, root: Path) -> None:
        self.loop = asyncio.new_event_loop()
        store = StoreConfig(
            store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
            mapped_file_size_consume_queue=20 * 16_384, max_hash_slot_num=1024,
            max_index_num=8192,
        )  # fmt: skip
        self.broker = Broker(BrokerConfig(listen_port=0, store=store))
        self.broken = False
        self.loop.run_until_complete(self._start())

    async def _start(self) -> None:
        self._logged = _CaughtExceptions()
        logger = logging.getLogger("pocketmq")
        logger.addHandler(self._logged)
        if not logger.isEnabledFor(logging.ERROR):
            logger.setLevel(logging.ERROR)
        await self.broker.start()
        self.channel = RemotingChannel()  # never connected: no long poll may wait on it
        self.grpc = MessagingService(self.broker, "127.0.0.1")
        topics = self.broker.topics
        for topic in TOPICS:
            topics.create_system_if_absent(topic, 4, 6)
        for group in GROUPS:
            self.broker.subscription_groups.find(group)
        for queue_id in range(4):
            cmd = RemotingCommand.request(
                RequestCode.SEND_MESSAGE, {**send_fields(), "queueId": queue_id}, b"seed"
            )
            resp = await self._dispatch(cmd)
            assert resp is not None and resp.code == ResponseCode.SUCCESS, resp
        self.broker.offsets.commit("FuzzG0", "FuzzT0", 0, 1)
        self.baseline = self.tables()

    def tables(self) -> Tables:
        b = self.broker
        return Tables(
            {n: c.to_json() for n, c in b.topics.table.items()},
            _client_offsets(b.offsets.table),
            {n: c.to_json() for n, c in b.subscription_groups.table.items()},
        )

    def reset(self) -> None:
        """Put the tables back to the baseline (the store's messages stay)."""
        b = self.broker
        b.topics.table.clear()
        b.topics.table.update(
            {n: TopicConfig.from_json(c) for n, c in self.baseline.topics.items()}
        )
        for key in _client_offsets(b.offsets.table):
            del b.offsets.table[key]
        b.offsets.table.update(copy.deepcopy(self.baseline.offsets))
        b.offsets.pull_table.clear()
        b.subscription_groups.table.clear()
        b.subscription_groups.table.update(
            {n: SubscriptionGroupConfig.from_json(c) for n, c in self.baseline.groups.items()}
        )
        b.locks = RebalanceLockManager()

    def check_persistable(self) -> None:
        """Every table must still be writable as JSON (a value past 64 bits is not)."""
        b = self.broker
        orjson.dumps(b.topics.wrapper(), option=orjson.OPT_NON_STR_KEYS)
        orjson.dumps(b.offsets.table, option=orjson.OPT_NON_STR_KEYS)
        orjson.dumps(b.subscription_groups.wrapper(), option=orjson.OPT_NON_STR_KEYS)

    def check_valid(self) -> None:
        """Every table holds only what the edge validators accept: a value that got past
        them (a perm of 10^20, a negative queue id) is how one request poisons a broker."""
        b = self.broker
        try:
            for name, cfg in b.topics.table.items():
                fields.check_topic(name)
                fields.check_queue_nums(cfg.read_queue_nums, f"{name}.readQueueNums")
                fields.check_queue_nums(cfg.write_queue_nums, f"{name}.writeQueueNums")
                fields.check_perm(cfg.perm, f"{name}.perm")
            for key, queues in b.offsets.table.items():
                topic, _, group = key.partition("@")
                fields.check_topic(topic)
                fields.check_group(group)
                for queue_id, offset in queues.items():
                    fields.check_queue_id(queue_id, name=f"{key} queue id")
                    fields.check_offset(offset, f"{key}:{queue_id}")
            for name in b.subscription_groups.table:
                fields.check_group(name)
        except fields.FieldError as exc:
            invalid = f"the tables hold an invalid {exc.kind.value}: {exc.remark}"
            raise AssertionError(invalid) from exc

    def close(self) -> None:
        logging.getLogger("pocketmq").removeHandler(self._logged)
        if self.broken:
            # A task that never yields may still be runnable: the loop is abandoned, never run
            # again, and only the store (its files and flush thread) is closed.
            self.broker.store.close()
        else:
            self.reset()  # the last input may have left what cannot be persisted
            self.loop.run_until_complete(self.broker.stop())
        self.loop.close()

    # -------------------------------------------------------------- remoting

    async def _dispatch(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """As RemotingChannel answers: a handler's RequestError becomes its response; any
        other exception escapes (a finding)."""
        try:
            result = self.broker.dispatcher(self.channel, cmd)
            if inspect.isawaitable(result):
                async with asyncio.timeout(HANG_S):
                    result = await result
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        return result

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run coro on the broker's loop; a loop blocked for BLOCKED_S is interrupted (SIGALRM
        raises in whatever runs) and reported with where it was stuck."""
        stuck: list[str] = []

        def alarm(signum: int, frame: FrameType | None) -> None:
            stuck.append("".join(traceback.format_stack(frame, limit=10)))
            raise Blocked("interrupted")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, BLOCKED_S)
        done: list[T] = []
        try:
            done.append(self.loop.run_until_complete(coro))
        except Blocked:
            pass  # reported below, with the stack it interrupted
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if stuck:  # the interrupted task may have been another one than coro
            self.broken = True
            raise Blocked(f"the event loop was blocked for {BLOCKED_S} s in:\n{stuck[0]}")
        return done[0]

    def remoting_target(self, cmd: RemotingCommand) -> None:
        """One request through the dispatcher, checked.

        Raises:
            AssertionError: a broken property (see the module docstring).
            Exception: anything escaping the dispatcher but RequestError is a finding.
        """
        self.reset()
        resp = self._run(self._dispatch(cmd))
        assert resp is not None, "no response"
        assert resp.code in ResponseCode._value2member_map_, f"not a RocketMQ code: {resp.code}"
        resp.encode()
        self.check_persistable()
        self.check_valid()
        if resp.code not in NOT_REFUSED:
            self._check_unchanged(cmd.code, resp)

    def _check_unchanged(self, code: int, resp: RemotingCommand) -> None:
        after, before = self.tables(), self.baseline
        why = f"refused ({resp.code} {resp.remark}) but changed"
        assert after.offsets == before.offsets, f"{why} offsets: {after.offsets}"
        for name, cfg in before.topics.items():
            assert after.topics.get(name) == cfg, f"{why} topic {name}: {after.topics.get(name)}"
        added = set(after.topics) - set(before.topics)
        assert not added or code in CREATES_TOPICS, f"{why} topics: created {added}"
        for name, cfg in before.groups.items():
            assert after.groups.get(name) == cfg, f"{why} group {name}: {after.groups.get(name)}"

    # -------------------------------------------------------------- gRPC

    def grpc_target(self, call: GrpcCall) -> None:
        """One v2 request into the servicer, checked.

        Raises:
            AssertionError: no Status came back.
            Exception: anything escaping the servicer is a finding.
        """
        self.reset()
        self._run(self._grpc(call))
        self._raise_logged()
        self.check_persistable()
        self.check_valid()

    def _raise_logged(self) -> None:
        """An exception the servicer caught and logged is still a finding: re-raise it."""
        caught, self._logged.caught = self._logged.caught, []
        if caught:
            raise caught[0]

    async def _grpc(self, call: GrpcCall) -> None:
        handler = getattr(self.grpc, call.method)
        context = FakeContext(call.metadata)
        async with asyncio.timeout(HANG_S):
            if call.method == "Telemetry":
                replies = [r async for r in handler(_aiter(call.requests), context)]
                for reply in replies:
                    assert reply.HasField("status"), f"a Telemetry reply without status: {reply}"
                return
            result = handler(call.requests[0], context)
            if inspect.isasyncgen(result):
                replies = [r async for r in result]
                assert replies and replies[0].HasField("status"), f"first reply: {replies[:1]}"
                statuses = [r.status for r in replies if r.HasField("status")]
            else:
                statuses = [(await result).status]
        for status in statuses:
            assert status.code in pb.Code.values(), f"not a v2 code: {status.code}"


# ------------------------------------------------------------------ gRPC requests


class FakeContext:
    """What the servicer reads off a call: metadata, the peer, the time left (none, so that
    no long poll waits)."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> float:
        return 0.0

    async def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted with {code}: {details}")


async def _aiter(items: list[ProtoMessage]) -> AsyncIterator[ProtoMessage]:
    for item in items:
        yield item
