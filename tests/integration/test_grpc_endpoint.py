"""The gRPC endpoint of ``pocketmq serve`` (a real process), driven with pocketmq's generated
stubs: refused and malformed requests get a clean status and the server keeps serving; the
Telemetry settings reply carries what the 5.x clients obey; a pull consumer's RPCs read a
queue from any offset, long-poll at its end and keep the group's committed offset. A lone
``pocketmq broker`` serves the same endpoint.

This process must not import the 5.x client (``rocketmq``): both register the same
``apache.rocketmq.v2`` protobuf names.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from server_procs import ServerProcess

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingClient

pytestmark = pytest.mark.integration
TIMEOUT_S = 10
META = (("x-mq-client-id", "test-client@1@0@abc"), ("x-mq-request-id", str(uuid.uuid4())))


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("serve")
    proc = ServerProcess(
        "serve", workdir, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()


@pytest.fixture(scope="module")
def server(serve: ServerProcess) -> str:
    return f"127.0.0.1:{serve.ready['grpc']}"


@pytest.fixture
async def channel(server: str) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server) as ch:
        yield ch


def message(**system: Any) -> pb.Message:
    props = {"message_id": uuid.uuid4().hex.upper(), "message_type": pb.NORMAL, **system}
    return pb.Message(
        topic=pb.Resource(name="GrpcTopic"),
        body=b"x",
        system_properties=pb.SystemProperties(**props),
    )


async def send(stub: MessagingServiceStub, *msgs: pb.Message) -> svc.SendMessageResponse:
    response: svc.SendMessageResponse = await stub.SendMessage(
        svc.SendMessageRequest(messages=msgs), metadata=META, timeout=TIMEOUT_S
    )
    return response


async def test_a_lone_broker_serves_grpc(tmp_path: Path) -> None:
    proc = ServerProcess("broker", tmp_path, "--store", str(tmp_path / "store"))
    try:
        endpoint = f"127.0.0.1:{proc.ready['grpc']}"
        async with grpc.aio.insecure_channel(endpoint) as ch:
            stub = MessagingServiceStub(ch)  # type: ignore[no-untyped-call]
            assert (await send(stub, message())).status.code == pb.OK
            route = await stub.QueryRoute(
                svc.QueryRouteRequest(topic=pb.Resource(name="GrpcTopic")), timeout=TIMEOUT_S
            )
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()
    assert route.status.code == pb.OK
    address = route.message_queues[0].broker.endpoints.addresses[0]
    assert f"{address.host}:{address.port}" == endpoint
    assert proc.port == proc.ready["broker"] != 0


def test_a_broker_whose_grpc_port_is_taken_stops_cleanly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli", "broker", "--listen", "127.0.0.1:0",
             "--store", str(tmp_path / "store"), "--grpc-port", str(taken.getsockname()[1])],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
    assert out.returncode == 1
    assert "cannot start the gRPC endpoint" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "store" / "abort").exists()  # the store was closed cleanly


async def test_query_route_of_missing_and_illegal_topics(channel: grpc.aio.Channel) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    missing = await stub.QueryRoute(
        svc.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), metadata=META,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert missing.status.code == pb.TOPIC_NOT_FOUND
    assert not missing.message_queues
    illegal = await stub.QueryRoute(
        svc.QueryRouteRequest(topic=pb.Resource(name="bad topic!")), timeout=TIMEOUT_S
    )
    assert illegal.status.code == pb.ILLEGAL_TOPIC


async def test_route_after_a_send_names_this_endpoint(
    channel: grpc.aio.Channel, server: str
) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    sent = await send(stub, message())  # the topic is auto-created, as a 4.x send would
    assert sent.status.code == pb.OK, sent.status.message
    route = await stub.QueryRoute(
        svc.QueryRouteRequest(topic=pb.Resource(name="GrpcTopic")), timeout=TIMEOUT_S
    )
    assert route.status.code == pb.OK
    assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
    for q in route.message_queues:
        assert q.permission == pb.READ_WRITE
        assert set(q.accept_message_types) == {pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION}
        address = q.broker.endpoints.addresses[0]
        assert f"{address.host}:{address.port}" == server


async def test_refused_sends_get_their_status(channel: grpc.aio.Channel) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    assert (await send(stub)).status.code == pb.BAD_REQUEST
    cases = [
        (message(message_id=""), pb.ILLEGAL_MESSAGE_ID),
        (message(message_type=pb.FIFO), pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(message_group="g"), pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (
            message(message_type=pb.TRANSACTION, message_group="g"),
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (message(tag="a||b"), pb.ILLEGAL_MESSAGE_TAG),
        (message(keys=["k\x01"]), pb.ILLEGAL_MESSAGE_KEY),
    ]
    for msg, code in cases:
        response = await send(stub, msg)
        assert response.status.code == code, (msg, response)
        assert response.entries[0].status.code == code
    reserved = message()
    reserved.user_properties["UNIQ_KEY"] = "mine"
    assert (await send(stub, reserved)).status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    empty = message()
    empty.body = b""
    assert (await send(stub, empty)).status.code == pb.MESSAGE_BODY_EMPTY
    bad_topic = message()
    bad_topic.topic.name = "bad topic!"
    assert (await send(stub, bad_topic)).status.code == pb.ILLEGAL_TOPIC
    mixed = await send(stub, message(), message(message_id=""))
    assert mixed.status.code == pb.MULTIPLE_RESULTS
    assert [e.status.code for e in mixed.entries] == [pb.OK, pb.ILLEGAL_MESSAGE_ID]


async def test_bodies_up_to_the_advertised_limit(channel: grpc.aio.Channel) -> None:
    """The settings reply promises max_body_size (4 MiB): a body of exactly that size is
    stored, and one byte more gets MESSAGE_BODY_TOO_LARGE, not a transport error."""
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    largest = message()
    largest.body = b"x" * (4 * 1024 * 1024)
    assert (await send(stub, largest)).status.code == pb.OK
    too_large = message()
    too_large.body = b"x" * (4 * 1024 * 1024 + 1)
    assert (await send(stub, too_large)).status.code == pb.MESSAGE_BODY_TOO_LARGE


async def test_undecodable_request_and_the_server_keeps_serving(
    channel: grpc.aio.Channel,
) -> None:
    raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await raw(b"\xff\xff\xff\xff", timeout=TIMEOUT_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    bidi = channel.stream_stream("/apache.rocketmq.v2.MessagingService/Telemetry")
    call = bidi(metadata=META, timeout=TIMEOUT_S)
    await call.write(b"\xff\xff\xff\xff")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    unknown = channel.unary_unary("/apache.rocketmq.v2.MessagingService/RecallMessage")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await unknown(b"", timeout=TIMEOUT_S)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    beat = await stub.Heartbeat(
        svc.HeartbeatRequest(client_type=pb.PRODUCER), metadata=META, timeout=TIMEOUT_S
    )
    assert beat.status.code == pb.OK


async def test_consumption_rpcs_refuse_bad_requests(channel: grpc.aio.Channel) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    stream = stub.ReceiveMessage(svc.ReceiveMessageRequest(), metadata=META, timeout=TIMEOUT_S)
    assert [r.status.code async for r in stream] == [pb.ILLEGAL_TOPIC]
    for call, request in (
        (stub.QueryAssignment, svc.QueryAssignmentRequest()),
        (stub.AckMessage, svc.AckMessageRequest()),
        (stub.ChangeInvisibleDuration, svc.ChangeInvisibleDurationRequest()),
        (stub.ForwardMessageToDeadLetterQueue, svc.ForwardMessageToDeadLetterQueueRequest()),
        (stub.EndTransaction, svc.EndTransactionRequest()),
    ):
        response = await call(request, metadata=META, timeout=TIMEOUT_S)
        assert response.status.code == pb.ILLEGAL_TOPIC

    assert (await send(stub, message())).status.code == pb.OK  # the topic exists
    topic = pb.Resource(name="GrpcTopic")
    group = pb.Resource(name="GID_REFUSED")

    def receive(**fields: Any) -> svc.ReceiveMessageRequest:
        base: dict[str, Any] = {
            "group": group, "message_queue": pb.MessageQueue(topic=topic, id=-1),
            "filter_expression": pb.FilterExpression(type=pb.TAG, expression="*"),
            "batch_size": 4, "invisible_duration": Duration(seconds=15),
            "long_polling_timeout": Duration(nanos=200_000_000),
        }  # fmt: skip
        return svc.ReceiveMessageRequest(**{**base, **fields})

    for request, code in (
        (receive(invisible_duration=Duration(seconds=1)), pb.ILLEGAL_INVISIBLE_TIME),
        (receive(batch_size=0), pb.BAD_REQUEST),
        (receive(filter_expression=pb.FilterExpression(type=pb.SQL, expression="a >")),
         pb.ILLEGAL_FILTER_EXPRESSION),
        (receive(filter_expression=pb.FilterExpression(type=pb.SQL, expression="a>1")),
         pb.MESSAGE_NOT_FOUND),
        (receive(group=pb.Resource(name="")), pb.ILLEGAL_CONSUMER_GROUP),
        (receive(filter_expression=pb.FilterExpression(type=pb.TAG, expression="NoSuchTag")),
         pb.MESSAGE_NOT_FOUND),
    ):  # fmt: skip
        stream = stub.ReceiveMessage(request, metadata=META, timeout=TIMEOUT_S)
        assert [r.status.code async for r in stream] == [code], request

    ack = await stub.AckMessage(
        svc.AckMessageRequest(
            group=group, topic=topic,
            entries=[svc.AckMessageEntry(message_id="X", receipt_handle="not a handle")],
        ),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert ack.status.code == pb.INVALID_RECEIPT_HANDLE
    assert [e.status.code for e in ack.entries] == [pb.INVALID_RECEIPT_HANDLE]
    change = await stub.ChangeInvisibleDuration(
        svc.ChangeInvisibleDurationRequest(
            group=group, topic=topic, receipt_handle="1 2 3 0 0 broker-a 0 0",
            invisible_duration=Duration(seconds=5), message_id="X",
        ),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert change.status.code == pb.INVALID_RECEIPT_HANDLE


async def telemetry(
    stub: MessagingServiceStub, settings: pb.Settings, metadata: Any = META
) -> svc.TelemetryCommand:
    call = stub.Telemetry(metadata=metadata, timeout=TIMEOUT_S)
    await call.write(svc.TelemetryCommand(settings=settings))
    reply: svc.TelemetryCommand = await call.read()
    await call.done_writing()
    return reply


async def test_telemetry_settings_reply(channel: grpc.aio.Channel) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    producer = pb.Settings(
        client_type=pb.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name="GrpcTopic")]),
        user_agent=pb.UA(language=pb.PYTHON, version="5.1.2"),
    )
    reply = await telemetry(stub, producer)
    assert reply.status.code == pb.OK
    assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert reply.settings.publishing.validate_message_type
    assert [t.name for t in reply.settings.publishing.topics] == ["GrpcTopic"]
    assert reply.settings.backoff_policy.max_attempts == 3
    assert reply.settings.backoff_policy.HasField("exponential_backoff")

    push = pb.Settings(
        client_type=pb.PUSH_CONSUMER,
        subscription=pb.Subscription(group=pb.Resource(name="CG_GRPC")),
    )
    reply = await telemetry(stub, push)
    assert reply.status.code == pb.OK
    sub = reply.settings.subscription
    assert sub.long_polling_timeout.seconds == 20
    assert sub.receive_batch_size == 32
    assert not sub.fifo
    backoff = reply.settings.backoff_policy
    assert backoff.max_attempts == 17
    assert [d.seconds for d in backoff.customized_backoff.next][:3] == [10, 30, 60]

    no_group = await telemetry(stub, pb.Settings(client_type=pb.SIMPLE_CONSUMER))
    assert no_group.status.code == pb.ILLEGAL_CONSUMER_GROUP
    unknown = await telemetry(stub, pb.Settings(client_type=pb.PULL_CONSUMER))
    assert unknown.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    anonymous = await telemetry(stub, producer, metadata=())
    assert anonymous.status.code == pb.CLIENT_ID_REQUIRED


async def pull(
    stub: MessagingServiceStub, **fields: Any
) -> tuple[pb.Status, list[pb.Message], int | None]:
    """One PullMessage call: its status, messages and next offset, whatever their order."""
    request = svc.PullMessageRequest(**{"batch_size": 32, **fields})
    code, msgs, next_offset = None, [], None
    async for r in stub.PullMessage(request, metadata=META, timeout=TIMEOUT_S):
        kind = r.WhichOneof("content")
        if kind == "status":
            code = r.status
        elif kind == "message":
            msgs.append(r.message)
        else:
            next_offset = r.next_offset
    assert code is not None, "the stream carried no status"
    return code, msgs, next_offset


async def test_pull_consumer_rpcs(channel: grpc.aio.Channel) -> None:
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    topic = pb.Resource(name="GrpcPullTopic")
    group = pb.Resource(name="GID_PULL")

    def fifo(tag: str) -> pb.Message:
        msg = message(tag=tag, message_type=pb.FIFO, message_group="order-1")
        msg.topic.CopyFrom(topic)
        msg.body = f"body {tag}".encode()
        return msg

    sent = await send(stub, fifo("A"), fifo("B"), fifo("A"))
    assert sent.status.code == pb.OK, sent.status.message
    ids = [e.message_id for e in sent.entries]

    async def query(queue_id: int, **fields: Any) -> svc.QueryOffsetResponse:
        mq = pb.MessageQueue(topic=topic, id=queue_id)
        response: svc.QueryOffsetResponse = await stub.QueryOffset(
            svc.QueryOffsetRequest(message_queue=mq, **fields), metadata=META, timeout=TIMEOUT_S
        )
        return response

    # One message group, one queue: the queue whose end is 3.
    ends = {q: (await query(q, query_offset_policy=pb.END)).offset for q in range(4)}
    [queue_id] = [q for q, end in ends.items() if end == 3]
    mq = pb.MessageQueue(topic=topic, id=queue_id)
    assert (await query(queue_id, query_offset_policy=pb.BEGINNING)).offset == 0
    future = Timestamp(seconds=4_000_000_000)
    at_future = await query(queue_id, query_offset_policy=pb.TIMESTAMP, timestamp=future)
    assert (at_future.status.code, at_future.offset) == (pb.OK, 3)
    at_zero = await query(queue_id, query_offset_policy=pb.TIMESTAMP, timestamp=Timestamp())
    assert (at_zero.status.code, at_zero.offset) == (pb.OK, 0)
    assert (await query(queue_id, query_offset_policy=pb.TIMESTAMP)).status.code == pb.BAD_REQUEST
    assert (await query(99)).status.code == pb.BAD_REQUEST
    elsewhere = pb.MessageQueue(topic=topic, id=0, broker=pb.Broker(name="broker-z"))
    moved = await stub.QueryOffset(
        svc.QueryOffsetRequest(message_queue=elsewhere), metadata=META, timeout=TIMEOUT_S
    )
    assert moved.status.code == pb.BAD_REQUEST
    missing = await stub.QueryOffset(
        svc.QueryOffsetRequest(message_queue=pb.MessageQueue(topic=pb.Resource(name="NoSuch"))),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert missing.status.code == pb.TOPIC_NOT_FOUND

    status, msgs, next_offset = await pull(stub, group=group, message_queue=mq, offset=0)
    assert status.code == pb.OK and next_offset == 3
    assert [m.body for m in msgs] == [b"body A", b"body B", b"body A"]
    assert [m.system_properties.message_id for m in msgs] == ids
    assert [m.system_properties.queue_offset for m in msgs] == [0, 1, 2]
    assert {
        (m.system_properties.message_type, m.system_properties.message_group) for m in msgs
    } == {(pb.FIFO, "order-1")}
    tag_a = pb.FilterExpression(type=pb.TAG, expression="A")
    status, msgs, next_offset = await pull(
        stub, group=group, message_queue=mq, offset=0, filter_expression=tag_a
    )
    assert [m.system_properties.tag for m in msgs] == ["A", "A"] and next_offset == 3
    by_sql = pb.FilterExpression(type=pb.SQL, expression="TAGS = 'B'")
    status, msgs, next_offset = await pull(
        stub, group=group, message_queue=mq, offset=0, filter_expression=by_sql
    )
    assert [m.system_properties.tag for m in msgs] == ["B"] and next_offset == 3
    short = Duration(nanos=200_000_000)
    status, msgs, next_offset = await pull(
        stub, group=group, message_queue=mq, offset=3, long_polling_timeout=short
    )
    assert (status.code, msgs, next_offset) == (pb.OK, [], 3)
    # Past the end of a queue that never lost a message: back to its start, as RocketMQ does.
    status, msgs, next_offset = await pull(stub, group=group, message_queue=mq, offset=99)
    assert (status.code, msgs, next_offset) == (pb.ILLEGAL_OFFSET, [], 0)
    for fields, code in (
        ({"batch_size": 0}, pb.BAD_REQUEST),
        ({"group": pb.Resource(name="")}, pb.ILLEGAL_CONSUMER_GROUP),
        ({"filter_expression": pb.FilterExpression(type=pb.SQL, expression="a >> 1")},
         pb.ILLEGAL_FILTER_EXPRESSION),
    ):  # fmt: skip
        status, _, _ = await pull(stub, **{"group": group, "message_queue": mq, **fields})
        assert status.code == code, fields

    # A pull at the end waits for the next message (it has usually parked by the time the
    # message is sent; either way it must return with it rather than after its timeout).
    waiting = asyncio.create_task(
        pull(
            stub, group=group, message_queue=mq, offset=3, long_polling_timeout=Duration(seconds=8)
        )
    )
    await asyncio.sleep(0.3)  # no client can see the pull park: give it time to (see above)
    assert (await send(stub, fifo("C"))).status.code == pb.OK
    status, msgs, next_offset = await waiting
    assert [m.body for m in msgs] == [b"body C"] and next_offset == 4

    async def get_offset(g: pb.Resource) -> svc.GetOffsetResponse:
        response: svc.GetOffsetResponse = await stub.GetOffset(
            svc.GetOffsetRequest(group=g, message_queue=mq), metadata=META, timeout=TIMEOUT_S
        )
        return response

    assert (await get_offset(group)).status.code == pb.OFFSET_NOT_FOUND
    assert (await get_offset(pb.Resource(name=""))).status.code == pb.ILLEGAL_CONSUMER_GROUP
    for offset, code in ((2, pb.OK), (-1, pb.ILLEGAL_OFFSET)):
        updated = await stub.UpdateOffset(
            svc.UpdateOffsetRequest(group=group, message_queue=mq, offset=offset),
            metadata=META, timeout=TIMEOUT_S,
        )  # fmt: skip
        assert updated.status.code == code
    committed = await get_offset(group)
    assert (committed.status.code, committed.offset) == (pb.OK, 2)


async def test_namespaces_prefix_topics_and_groups(channel: grpc.aio.Channel) -> None:
    """A 5.x client's namespace prefixes its topics and groups as RocketMQ's NamespaceUtil
    does (``ns%Topic``), which is the name a 4.x client with that namespace uses."""
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    topic = pb.Resource(name="NsTopic", resource_namespace="ns1")
    msg = message()
    msg.topic.CopyFrom(topic)
    assert (await send(stub, msg)).status.code == pb.OK  # auto-creates ns1%NsTopic

    def route(resource: pb.Resource) -> Any:
        return stub.QueryRoute(
            svc.QueryRouteRequest(topic=resource), metadata=META, timeout=TIMEOUT_S
        )

    routed = await route(topic)
    assert routed.status.code == pb.OK
    assert {(q.topic.name, q.topic.resource_namespace) for q in routed.message_queues} == {
        ("NsTopic", "ns1")
    }
    assert (await route(pb.Resource(name="NsTopic"))).status.code == pb.TOPIC_NOT_FOUND
    assert (await route(pb.Resource(name="ns1%NsTopic"))).status.code == pb.OK

    request = svc.ReceiveMessageRequest(
        group=pb.Resource(name="GID_NS", resource_namespace="ns1"),
        message_queue=pb.MessageQueue(topic=topic, id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=4,
        invisible_duration=Duration(seconds=15), long_polling_timeout=Duration(seconds=2),
    )  # fmt: skip
    got = [
        r.message
        async for r in stub.ReceiveMessage(request, metadata=META, timeout=TIMEOUT_S)
        if r.WhichOneof("content") == "message"
    ]
    assert [(m.topic.name, m.topic.resource_namespace) for m in got] == [("NsTopic", "ns1")]
    entry = svc.AckMessageEntry(
        message_id=got[0].system_properties.message_id,
        receipt_handle=got[0].system_properties.receipt_handle,
    )
    ack = await stub.AckMessage(
        svc.AckMessageRequest(group=request.group, topic=topic, entries=[entry]),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert ack.status.code == pb.OK


async def test_a_group_that_may_not_consume_receives_nothing(
    channel: grpc.aio.Channel, serve: ServerProcess
) -> None:
    """consumeEnable off refuses a 5.x receive as it refuses a 4.x pull (PopMessageProcessor)."""
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    assert (await send(stub, message())).status.code == pb.OK
    client = RemotingClient()
    try:
        resp = await client.invoke(
            f"127.0.0.1:{serve.ready['broker']}",
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                json_body.dumps({"groupName": "GID_DISABLED", "consumeEnable": False}),
            ),
            TIMEOUT_S,
        )  # fmt: skip
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()
    request = svc.ReceiveMessageRequest(
        group=pb.Resource(name="GID_DISABLED"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcTopic"), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=4, invisible_duration=Duration(seconds=15),
        long_polling_timeout=Duration(nanos=200_000_000),
    )  # fmt: skip
    stream = stub.ReceiveMessage(request, metadata=META, timeout=TIMEOUT_S)
    statuses = [r.status async for r in stream]
    assert [s.code for s in statuses] == [pb.FORBIDDEN]
    assert "subscription group no permission" in statuses[0].message
