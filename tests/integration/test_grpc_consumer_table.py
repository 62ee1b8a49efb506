"""5.x consumers in the broker's consumer table: a push consumer's Telemetry settings register
it, so GET_CONSUMER_CONNECTION_LIST (203, ConsumerConnection), GET_CONSUMER_LIST_BY_GROUP
(38) and QUERY_TOPIC_CONSUME_BY_WHO (300, GroupList) see it, as RocketMQ's proxy registers
gRPC clients; the end of its stream removes it (CONSUMER_NOT_ONLINE).

This process must not import the 5.x client (``rocketmq``): both register the same
``apache.rocketmq.v2`` protobuf names.
"""

from __future__ import annotations

import grpc
import pytest
from server_procs import ServerProcess
from test_grpc_endpoint import META, TIMEOUT_S, channel, serve, server  # noqa: F401 - fixtures

from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.grpc.v2.service_pb2_grpc import MessagingServiceStub
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import CURRENT_VERSION, RemotingCommand
from pocketmq.protocol.versions import version_ordinal
from pocketmq.remoting import RemotingClient

pytestmark = pytest.mark.integration


async def test_a_push_consumer_is_in_the_consumer_table_while_its_stream_lasts(
    channel: grpc.aio.Channel,  # noqa: F811
    serve: ServerProcess,  # noqa: F811
) -> None:
    broker = f"127.0.0.1:{serve.ready['broker']}"
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    settings = pb.Settings(
        client_type=pb.PUSH_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name="CG_GRPC_TABLE"),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name="GrpcTableTopic"),
                    expression=pb.FilterExpression(type=pb.TAG, expression="A || B"),
                )
            ],
        ),
        user_agent=pb.UA(language=pb.PYTHON, version="5.1.2"),
    )
    # The proxy reads x-mq-client-version as a MQVersion name (ClientActivity).
    call = stub.Telemetry(metadata=(*META, ("x-mq-client-version", "V5_1_2")), timeout=TIMEOUT_S)
    client = RemotingClient()
    try:
        await call.write(svc.TelemetryCommand(settings=settings))
        reply: svc.TelemetryCommand = await call.read()
        assert reply.status.code == pb.OK

        ask = RemotingCommand.request(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG_GRPC_TABLE"}
        )
        resp = await client.invoke(broker, ask, TIMEOUT_S)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        cc = json_body.loads(resp.body)
        [conn] = cc["connectionSet"]  # Connection
        assert conn["clientId"] == dict(META)["x-mq-client-id"]
        assert conn["language"] == "PYTHON" and conn["clientAddr"].startswith("127.0.0.1:")
        assert conn["version"] == version_ordinal("V5_1_2")
        assert cc["consumeType"] == "CONSUME_PASSIVELY" and cc["messageModel"] == "CLUSTERING"
        assert cc["subscriptionTable"]["GrpcTableTopic"]["tagsSet"] == ["A", "B"]

        ids = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG_GRPC_TABLE"}
        ), TIMEOUT_S)  # fmt: skip
        assert json_body.loads(ids.body)["consumerIdList"] == [conn["clientId"]]
        who = await client.invoke(broker, RemotingCommand.request(
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "GrpcTableTopic"}
        ), TIMEOUT_S)  # fmt: skip
        assert "CG_GRPC_TABLE" in json_body.loads(who.body)["groupList"]
        # A request meant for a remoting client is refused, not dropped.
        running = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": "CG_GRPC_TABLE", "clientId": conn["clientId"]},
        ), TIMEOUT_S)  # fmt: skip
        assert running.code == ResponseCode.SYSTEM_ERROR and "gRPC" in (running.remark or "")

        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK  # the stream has ended
        gone = await client.invoke(broker, ask, TIMEOUT_S)
        assert gone.code == ResponseCode.CONSUMER_NOT_ONLINE
    finally:
        call.cancel()
        await client.close()


async def test_a_5x_producer_is_in_the_producer_table_by_topic(
    channel: grpc.aio.Channel,  # noqa: F811
    serve: ServerProcess,  # noqa: F811
) -> None:
    """5.x producers name no group: the proxy registers them under each topic they publish,
    and GET_PRODUCER_CONNECTION_LIST (204, ProducerConnection) lists them there."""
    broker = f"127.0.0.1:{serve.ready['broker']}"
    stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    settings = pb.Settings(
        client_type=pb.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name="GrpcProducerTopic")]),
        user_agent=pb.UA(language=pb.GOLANG, version="5.1.2"),
    )
    call = stub.Telemetry(metadata=META, timeout=TIMEOUT_S)
    client = RemotingClient()
    try:
        await call.write(svc.TelemetryCommand(settings=settings))
        assert (await call.read()).status.code == pb.OK
        resp = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "GrpcProducerTopic"}
        ), TIMEOUT_S)  # fmt: skip
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        [conn] = json_body.loads(resp.body)["connectionSet"]
        assert conn["clientId"] == dict(META)["x-mq-client-id"] and conn["language"] == "GO"
        assert conn["clientAddr"].startswith("127.0.0.1:")
        assert conn["version"] == CURRENT_VERSION  # no version header: the server's own
    finally:
        call.cancel()
        await client.close()
