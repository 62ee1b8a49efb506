"""Poison requests to a live `pocketmq serve`: requests whose fields are absurd (counts, offsets,
queue ids, timeouts, sizes and permissions past RocketMQ's limits, junk bodies) are refused with
a RocketMQ response code on a connection that stays open, and leave the broker whole: topics are
still created (by admin request and on first send), routes still reach the NameServer, offsets
are still persisted, and SIGTERM still stops it cleanly (exit 0, no abort marker).

Fields at their limits are accepted. The gRPC endpoint refuses the same kinds of values through
the official-protocol stubs with a v2 status. This process must not import the 5.x client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from server_procs import ServerProcess

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

pytestmark = pytest.mark.integration

TOPIC, GROUP = "PoisonTopic", "PoisonGroup"
QUEUES = 4
HUGE = 10**20  # fits neither a Java int nor a Java long
TIMEOUT_S = 5
# Results that are answers, not refusals.
NOT_REFUSED = {
    ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
    ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.QUERY_NOT_FOUND,
}  # fmt: skip


@dataclass
class Case:
    label: str
    code: RequestCode
    fields: dict[str, Any]
    body: bytes = b""
    base: dict[str, Any] = field(default_factory=dict)

    def command(self) -> RemotingCommand:
        return RemotingCommand.request(self.code, {**self.base, **self.fields}, self.body)


def create_topic(**fields: Any) -> dict[str, Any]:
    return {
        "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES,
        "writeQueueNums": QUEUES, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": "false", **fields,
    }  # fmt: skip


def update_offset(**fields: Any) -> dict[str, Any]:
    return {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 1, **fields}


def pull(**fields: Any) -> dict[str, Any]:
    return {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "queueOffset": 0,
        "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
        "subscription": "*", "subVersion": 0, "expressionType": "TAG", **fields,
    }  # fmt: skip


def send(**fields: Any) -> dict[str, Any]:
    return {
        "producerGroup": "PoisonProducer", "topic": TOPIC, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": QUEUES, "queueId": 0, "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
        "reconsumeTimes": 0, **fields,
    }  # fmt: skip


def send_back(**fields: Any) -> dict[str, Any]:
    return {
        "group": GROUP, "offset": 0, "delayLevel": 0, "originTopic": TOPIC,
        "maxReconsumeTimes": 16, **fields,
    }  # fmt: skip


def lock_body(queue_id: Any = 0, **fields: Any) -> bytes:
    body = {
        "consumerGroup": GROUP, "clientId": "poison@1",
        "mqSet": [{"topic": TOPIC, "brokerName": "broker-a", "queueId": queue_id}], **fields,
    }  # fmt: skip
    return json.dumps(body).encode()


C = RequestCode
POISON = [
    # UPDATE_AND_CREATE_TOPIC: permissions, queue counts and names past RocketMQ's limits.
    Case("topic-perm-huge", C.UPDATE_AND_CREATE_TOPIC, create_topic(perm=HUGE)),
    Case("topic-perm-priority-bit", C.UPDATE_AND_CREATE_TOPIC, create_topic(perm=8)),
    Case("topic-perm-negative", C.UPDATE_AND_CREATE_TOPIC, create_topic(perm=-1)),
    Case("topic-read-0", C.UPDATE_AND_CREATE_TOPIC, create_topic(readQueueNums=0)),
    Case("topic-read-negative", C.UPDATE_AND_CREATE_TOPIC, create_topic(readQueueNums=-1)),
    Case("topic-read-huge", C.UPDATE_AND_CREATE_TOPIC, create_topic(readQueueNums=HUGE)),
    Case("topic-read-1025", C.UPDATE_AND_CREATE_TOPIC, create_topic(readQueueNums=1025)),
    Case("topic-write-0", C.UPDATE_AND_CREATE_TOPIC, create_topic(writeQueueNums=0)),
    Case("topic-write-negative", C.UPDATE_AND_CREATE_TOPIC, create_topic(writeQueueNums=-1)),
    Case("topic-write-huge", C.UPDATE_AND_CREATE_TOPIC, create_topic(writeQueueNums=HUGE)),
    Case("topic-sysflag-huge", C.UPDATE_AND_CREATE_TOPIC, create_topic(topicSysFlag=HUGE)),
    Case("topic-name-128", C.UPDATE_AND_CREATE_TOPIC, create_topic(topic="T" * 128)),
    Case("topic-name-huge", C.UPDATE_AND_CREATE_TOPIC, create_topic(topic="T" * 100_000)),
    Case("topic-name-illegal", C.UPDATE_AND_CREATE_TOPIC, create_topic(topic="bad topic")),
    Case("topic-name-newline", C.UPDATE_AND_CREATE_TOPIC, create_topic(topic="Topic\n")),
    Case("topic-name-path", C.UPDATE_AND_CREATE_TOPIC, create_topic(topic="../../etc")),
    # UPDATE_CONSUMER_OFFSET: offsets past a long or negative, queue ids outside the topic.
    Case("offset-commit-huge", C.UPDATE_CONSUMER_OFFSET, update_offset(commitOffset=HUGE)),
    Case("offset-commit-2^63", C.UPDATE_CONSUMER_OFFSET, update_offset(commitOffset=2**63)),
    Case("offset-commit-negative", C.UPDATE_CONSUMER_OFFSET, update_offset(commitOffset=-5)),
    Case("offset-queue-negative", C.UPDATE_CONSUMER_OFFSET, update_offset(queueId=-1)),
    Case("offset-queue-past-count", C.UPDATE_CONSUMER_OFFSET, update_offset(queueId=QUEUES)),
    Case("offset-queue-huge", C.UPDATE_CONSUMER_OFFSET, update_offset(queueId=HUGE)),
    Case("offset-commit-junk", C.UPDATE_CONSUMER_OFFSET, update_offset(commitOffset="abc")),
    Case("offset-commit-inf", C.UPDATE_CONSUMER_OFFSET, update_offset(commitOffset="1e400")),
    Case("offset-no-topic", C.UPDATE_CONSUMER_OFFSET, update_offset(topic="NoSuchTopic")),
    # PULL_MESSAGE: hold times, batch sizes, offsets and queue ids.
    Case("pull-suspend-huge", C.PULL_MESSAGE, pull(sysFlag=6, suspendTimeoutMillis=HUGE)),
    Case("pull-max-0", C.PULL_MESSAGE, pull(maxMsgNums=0)),
    Case("pull-max-negative", C.PULL_MESSAGE, pull(maxMsgNums=-1)),
    Case("pull-max-10^9", C.PULL_MESSAGE, pull(maxMsgNums=10**9)),
    Case("pull-offset-negative", C.PULL_MESSAGE, pull(queueOffset=-1)),
    Case("pull-offset-huge", C.PULL_MESSAGE, pull(queueOffset=HUGE)),
    Case("pull-queue-negative", C.PULL_MESSAGE, pull(queueId=-1)),
    Case("pull-queue-past-count", C.PULL_MESSAGE, pull(queueId=QUEUES)),
    Case("pull-queue-huge", C.PULL_MESSAGE, pull(queueId=HUGE)),
    Case("pull-commit-huge", C.PULL_MESSAGE, pull(sysFlag=5, commitOffset=HUGE)),
    Case("pull-sysflag-huge", C.PULL_MESSAGE, pull(sysFlag=HUGE)),
    # SEND_MESSAGE (and V2's one-letter names): queue ids, Java int flags, timestamps.
    Case("send-queue-huge", C.SEND_MESSAGE, send(queueId=HUGE), b"x"),
    Case("send-queue-past-count", C.SEND_MESSAGE, send(queueId=QUEUES), b"x"),
    Case("send-flag-2^31", C.SEND_MESSAGE, send(flag=2**31), b"x"),
    Case("send-flag-below-int", C.SEND_MESSAGE, send(flag=-(2**31) - 1), b"x"),
    Case("send-sysflag-2^31", C.SEND_MESSAGE, send(sysFlag=2**31), b"x"),
    Case("send-sysflag-huge", C.SEND_MESSAGE, send(sysFlag=HUGE), b"x"),
    Case("send-born-huge", C.SEND_MESSAGE, send(bornTimestamp=HUGE), b"x"),
    Case("send-born-2^62", C.SEND_MESSAGE, send(bornTimestamp=2**62), b"x"),
    Case("send-born-negative", C.SEND_MESSAGE, send(bornTimestamp=-1), b"x"),
    Case("send-reconsume-huge", C.SEND_MESSAGE, send(reconsumeTimes=HUGE), b"x"),
    Case("send-topic-huge", C.SEND_MESSAGE, send(topic="T" * 100_000), b"x"),
    Case("send-v2-queue-huge", C.SEND_MESSAGE_V2,
         {"a": "PoisonProducer", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": HUGE, "f": 0,
          "g": 0, "h": 0, "i": "", "j": 0}, b"x"),
    # CONSUMER_SEND_MSG_BACK: CommitLog offsets that cannot be one.
    Case("send-back-offset-negative", C.CONSUMER_SEND_MSG_BACK, send_back(offset=-1)),
    Case("send-back-offset-huge", C.CONSUMER_SEND_MSG_BACK, send_back(offset=HUGE)),
    Case("send-back-offset-past-log", C.CONSUMER_SEND_MSG_BACK, send_back(offset=2**63 - 1)),
    Case("send-back-offset-junk", C.CONSUMER_SEND_MSG_BACK, send_back(offset="abc")),
    Case("send-back-delay-huge", C.CONSUMER_SEND_MSG_BACK, send_back(delayLevel=HUGE)),
    # LOCK_BATCH_MQ: bodies that are not a LockBatchRequestBody.
    Case("lock-not-json", C.LOCK_BATCH_MQ, {}, b"{not json"),
    Case("lock-array", C.LOCK_BATCH_MQ, {}, b"[1, 2]"),
    Case("lock-empty", C.LOCK_BATCH_MQ, {}, b""),
    Case("lock-no-mqset", C.LOCK_BATCH_MQ, {}, b'{"consumerGroup": "G", "clientId": "c"}'),
    Case("lock-queue-junk", C.LOCK_BATCH_MQ, {}, lock_body("abc")),
    Case("lock-queue-huge", C.LOCK_BATCH_MQ, {}, lock_body(HUGE)),
    Case("lock-queue-inf", C.LOCK_BATCH_MQ, {},
         lock_body().replace(b'"queueId": 0', b'"queueId": 1e400')),
    Case("lock-group-object", C.LOCK_BATCH_MQ, {}, lock_body(consumerGroup={"a": 1})),
    # Other numeric fields past their Java types.
    Case("query-offset-queue-huge", C.QUERY_CONSUMER_OFFSET,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": HUGE}),
    Case("max-offset-queue-huge", C.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": HUGE}),
    Case("search-time-huge", C.SEARCH_OFFSET_BY_TIMESTAMP,
         {"topic": TOPIC, "queueId": 0, "timestamp": HUGE}),
    Case("view-offset-negative", C.VIEW_MESSAGE_BY_ID, {"offset": -1}),
    Case("view-offset-huge", C.VIEW_MESSAGE_BY_ID, {"offset": HUGE}),
    Case("query-max-huge", C.QUERY_MESSAGE,
         {"topic": TOPIC, "key": "k", "maxNum": HUGE, "beginTimestamp": 0, "endTimestamp": 1}),
    # Last, as accepted they starve the broker: a message sent into the delay levels' own
    # topic (or the timer's) is re-put into it again and again.
    # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: names and numbers a table cannot keep.
    Case("group-name-illegal", C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
         json.dumps({"groupName": "bad group"}).encode()),
    Case("group-retry-queues-huge", C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
         json.dumps({"groupName": "G1", "retryQueueNums": HUGE}).encode()),
    Case("group-retry-times-huge", C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
         json.dumps({"groupName": "G2", "retryMaxTimes": HUGE}).encode()),
    # A transactional half message is refused while transactions are not served.
    Case("send-half-message", C.SEND_MESSAGE, send(sysFlag=4), b"x"),
    Case("send-schedule-topic", C.SEND_MESSAGE, send(topic="SCHEDULE_TOPIC_XXXX"), b"x"),
    Case("send-timer-topic", C.SEND_MESSAGE, send(topic="rmq_sys_wheel_timer"), b"x"),
]  # fmt: skip

# Values at the limits: answered, not refused.
AT_LIMITS = [
    Case("topic-1-queue-perm-0", C.UPDATE_AND_CREATE_TOPIC,
         create_topic(topic="LimitTopicA", readQueueNums=1, writeQueueNums=1, perm=0)),
    Case("topic-1024-queues-perm-7", C.UPDATE_AND_CREATE_TOPIC,
         create_topic(topic="LimitTopicB", readQueueNums=1024, writeQueueNums=1024, perm=7)),
    Case("offset-commit-long-max", C.UPDATE_CONSUMER_OFFSET,
         update_offset(queueId=QUEUES - 1, commitOffset=2**63 - 1)),
    Case("offset-commit-0", C.UPDATE_CONSUMER_OFFSET, update_offset(queueId=2, commitOffset=0)),
    Case("pull-max-1024", C.PULL_MESSAGE, pull(queueId=QUEUES - 1, maxMsgNums=1024)),
    Case("pull-max-1", C.PULL_MESSAGE, pull(maxMsgNums=1)),
    # A negative hold is no hold, as the proxy clamps a long polling timeout.
    Case("pull-suspend-negative", C.PULL_MESSAGE, pull(sysFlag=6, suspendTimeoutMillis=-1)),
    Case("send-any-queue", C.SEND_MESSAGE, send(queueId=-1), b"x"),
    Case("send-last-queue", C.SEND_MESSAGE, send(queueId=QUEUES - 1), b"x"),
    Case("send-int-limits", C.SEND_MESSAGE,
         send(flag=2**31 - 1, bornTimestamp=0, reconsumeTimes=0), b"x"),
]  # fmt: skip


def serve(workdir: Path) -> ServerProcess:
    return ServerProcess(
        "serve", workdir, "--store", str(workdir / "store"), "--namesrv-port", "0",
        "--broker-port", "0", listen=False,
    )  # fmt: skip


def broker_addr(proc: ServerProcess) -> str:
    return f"127.0.0.1:{proc.ready['broker']}"


async def setup_topic(client: RemotingClient, addr: str) -> None:
    resp = await client.invoke(
        addr, RemotingCommand.request(C.UPDATE_AND_CREATE_TOPIC, create_topic()), TIMEOUT_S
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = serve(tmp_path_factory.mktemp("poison"))

    async def prepare() -> None:
        client = RemotingClient()
        try:
            await setup_topic(client, broker_addr(proc))
        finally:
            await client.close()

    try:
        asyncio.run(prepare())
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()[-3000:]


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    try:
        yield client
    finally:
        await client.close()


@pytest.mark.parametrize("case", POISON, ids=[c.label for c in POISON])
async def test_poison_request_is_refused(
    case: Case, server: ServerProcess, client: RemotingClient
) -> None:
    log_before = server.log_path.read_text()
    channel = await client.channel(broker_addr(server))
    resp = await channel.invoke(case.command(), TIMEOUT_S)
    assert resp.code not in NOT_REFUSED, f"accepted: {resp.code} {resp.remark}"
    assert resp.code in ResponseCode._value2member_map_, resp.code
    assert resp.remark, "a refusal says what to fix"
    assert channel.is_open
    # Refused at the edge, not by an exception deep inside the broker.
    assert "Traceback" not in server.log_path.read_text()[len(log_before) :]


@pytest.mark.parametrize("case", AT_LIMITS, ids=[c.label for c in AT_LIMITS])
async def test_fields_at_their_limits_are_accepted(
    case: Case, server: ServerProcess, client: RemotingClient
) -> None:
    resp = await client.invoke(broker_addr(server), case.command(), TIMEOUT_S)
    assert resp.code in NOT_REFUSED, f"{resp.code} {resp.remark}"


async def invoke(client: RemotingClient, addr: str, code: int, **fields: Any) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, fields), TIMEOUT_S)


async def wait_for_route(client: RemotingClient, namesrv: str, topic: str) -> None:
    """The broker re-registers at once after a topic is created; the NameServer then knows it."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        resp = await invoke(client, namesrv, C.GET_ROUTEINFO_BY_TOPIC, topic=topic)
        if resp.code == ResponseCode.SUCCESS:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no route for {topic}")


def config_file(workdir: Path, name: str) -> Any:
    return json.loads((workdir / "store" / "config" / name).read_text())


async def test_broker_stays_whole_after_the_poison(tmp_path: Path) -> None:
    proc = serve(tmp_path)
    addr, namesrv = broker_addr(proc), f"127.0.0.1:{proc.ready['namesrv']}"
    client = RemotingClient()
    try:
        await setup_topic(client, addr)
        for case in POISON:
            # A hold that is not capped times out; the checks below still apply.
            with contextlib.suppress(TimeoutError):
                await client.invoke(addr, case.command(), 2)
        created = await invoke(client, addr, C.UPDATE_AND_CREATE_TOPIC,
                               **create_topic(topic="AfterPoison"))  # fmt: skip
        assert created.code == ResponseCode.SUCCESS, created.remark
        assert "AfterPoison" in config_file(tmp_path, "topics.json")["topicConfigTable"]
        await wait_for_route(client, namesrv, "AfterPoison")
        sent = await client.invoke(
            addr, RemotingCommand.request(C.SEND_MESSAGE, send(topic="AutoCreated"), b"x"), 5
        )
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert "AutoCreated" in config_file(tmp_path, "topics.json")["topicConfigTable"]
        await wait_for_route(client, namesrv, "AutoCreated")
        committed = await invoke(client, addr, C.UPDATE_CONSUMER_OFFSET,
                                 **update_offset(queueId=1, commitOffset=42))  # fmt: skip
        assert committed.code == ResponseCode.SUCCESS, committed.remark
    finally:
        await client.close()
        exit_code = proc.stop()
    log = proc.log_path.read_text()
    assert exit_code == 0, log[-3000:]
    assert not (tmp_path / "store" / "abort").exists(), "the store was not closed cleanly"
    offsets = config_file(tmp_path, "consumerOffset.json")["offsetTable"]
    assert offsets[f"{TOPIC}@{GROUP}"]["1"] == 42

    proc = serve(tmp_path)
    client = RemotingClient()
    try:
        queried = await invoke(client, broker_addr(proc), C.QUERY_CONSUMER_OFFSET,
                               consumerGroup=GROUP, topic=TOPIC, queueId=1)  # fmt: skip
        assert queried.code == ResponseCode.SUCCESS, queried.remark
        assert queried.ext_fields["offset"] == "42"
    finally:
        await client.close()
        assert proc.stop() == 0, proc.log_path.read_text()[-3000:]
    assert not (tmp_path / "store" / "abort").exists()


# ------------------------------------------------------------------ gRPC

META = (("x-mq-client-id", "poison-client@1@0@abc"), ("x-mq-request-id", str(uuid.uuid4())))
GRPC_TOPIC = pb.Resource(name=TOPIC)
GRPC_GROUP = pb.Resource(name=GROUP)


def queue(queue_id: int) -> pb.MessageQueue:
    return pb.MessageQueue(topic=GRPC_TOPIC, id=queue_id, broker=pb.Broker(name="broker-a"))


def receive(**fields: Any) -> svc.ReceiveMessageRequest:
    base: dict[str, Any] = {
        "group": GRPC_GROUP, "message_queue": queue(-1),
        "filter_expression": pb.FilterExpression(type=pb.TAG, expression="*"),
        "batch_size": 4, "invisible_duration": Duration(seconds=15),
        "long_polling_timeout": Duration(nanos=100_000_000),
    }  # fmt: skip
    return svc.ReceiveMessageRequest(**{**base, **fields})


def grpc_pull(**fields: Any) -> svc.PullMessageRequest:
    base: dict[str, Any] = {
        "group": GRPC_GROUP, "message_queue": queue(0), "offset": 0, "batch_size": 4,
        "filter_expression": pb.FilterExpression(type=pb.TAG, expression="*"),
        "long_polling_timeout": Duration(nanos=100_000_000),
    }  # fmt: skip
    return svc.PullMessageRequest(**{**base, **fields})


def update(**fields: Any) -> svc.UpdateOffsetRequest:
    base: dict[str, Any] = {"group": GRPC_GROUP, "message_queue": queue(0), "offset": 1}
    return svc.UpdateOffsetRequest(**{**base, **fields})


GRPC_POISON = [
    ("receive-batch-int-max", "ReceiveMessage", receive(batch_size=2**31 - 1)),
    ("receive-batch-negative", "ReceiveMessage", receive(batch_size=-1)),
    ("receive-invisible-huge", "ReceiveMessage",
     receive(invisible_duration=Duration(seconds=315_576_000_000))),
    ("receive-invisible-negative", "ReceiveMessage",
     receive(invisible_duration=Duration(seconds=-10))),
    ("pull-batch-0", "PullMessage", grpc_pull(batch_size=0)),
    ("pull-batch-int-max", "PullMessage", grpc_pull(batch_size=2**31 - 1)),
    ("pull-offset-negative", "PullMessage", grpc_pull(offset=-1)),
    ("pull-queue-negative", "PullMessage", grpc_pull(message_queue=queue(-1))),
    ("pull-queue-int-max", "PullMessage", grpc_pull(message_queue=queue(2**31 - 1))),
    ("update-offset-negative", "UpdateOffset", update(offset=-5)),
    ("update-queue-past-count", "UpdateOffset", update(message_queue=queue(QUEUES))),
    ("update-queue-negative", "UpdateOffset", update(message_queue=queue(-1))),
    ("change-invisible-huge", "ChangeInvisibleDuration",
     svc.ChangeInvisibleDurationRequest(
         group=GRPC_GROUP, topic=GRPC_TOPIC, receipt_handle="1 2 3 0 0 broker-a 0 0",
         invisible_duration=Duration(seconds=315_576_000_000), message_id="X")),
]  # fmt: skip


@pytest.fixture
async def stub(server: ServerProcess) -> AsyncIterator[MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ready['grpc']}") as channel:
        yield MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("method", "request_"), [c[1:] for c in GRPC_POISON], ids=[c[0] for c in GRPC_POISON]
)
async def test_grpc_poison_request_is_refused(
    method: str, request_: Any, stub: MessagingServiceStub, server: ServerProcess
) -> None:
    log_before = server.log_path.read_text()
    call = getattr(stub, method)
    if method in ("ReceiveMessage", "PullMessage"):
        statuses = [
            r.status async for r in call(request_, metadata=META, timeout=TIMEOUT_S)
            if r.WhichOneof("content") == "status"
        ]  # fmt: skip
        assert statuses, "the stream carried no status"
        status = statuses[0]
    else:
        status = (await call(request_, metadata=META, timeout=TIMEOUT_S)).status
    assert status.code not in (pb.OK, pb.MESSAGE_NOT_FOUND), status
    assert status.code in pb.Code.values() and status.message
    assert "Traceback" not in server.log_path.read_text()[len(log_before) :]
    beat = await stub.Heartbeat(
        svc.HeartbeatRequest(client_type=pb.PRODUCER), metadata=META, timeout=TIMEOUT_S
    )
    assert beat.status.code == pb.OK
