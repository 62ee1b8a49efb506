"""Server-pushed Telemetry commands: a check-back becomes a RecoverOrphanedTransactionCommand
for the producer's topic, and a stream that is not read, or has ended, never makes a push
wait."""

from __future__ import annotations

from pocketmq.broker.transaction import CheckRequest, ProducerRegistry
from pocketmq.clock import FakeClock
from pocketmq.grpc.telemetry import OUTBOX_LIMIT, Outbox, StreamChecker
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.message import MessageConst, MessageExt, create_offset_msg_id

STORE_HOST = ("127.0.0.1", 10911)


def as_sent() -> MessageExt:
    """A half as the check-back service hands it over: real topic and queue restored."""
    return MessageExt(
        topic="ns%TxTopic", body=b"open", queue_id=2, queue_offset=7, phy_offset=4096,
        born_timestamp=1_700_000_000_000, store_host=STORE_HOST,
        properties={
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UNIQ1",
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: "ns%TxTopic",
            MessageConst.REAL_TOPIC: "ns%TxTopic",
            MessageConst.REAL_QUEUE_ID: "2",
            MessageConst.TRANSACTION_ID: "UNIQ1",
            MessageConst.TAGS: "TagA",
            "color": "blue",
        },
    )  # fmt: skip


def request() -> CheckRequest:
    return CheckRequest(
        tran_state_table_offset=7, commit_log_offset=4096, msg_id="UNIQ1",
        offset_msg_id=create_offset_msg_id(STORE_HOST, 4096), transaction_id="UNIQ1",
        topic="RMQ_SYS_TRANS_HALF_TOPIC",
    )  # fmt: skip


def test_a_check_becomes_a_recover_command() -> None:
    outbox = Outbox("client-1")
    topic = pb.Resource(name="TxTopic", resource_namespace="ns")
    StreamChecker(outbox, topic).check(as_sent(), request())
    pushed = outbox.queue.get_nowait()
    assert isinstance(pushed, svc.TelemetryCommand)
    command = pushed.recover_orphaned_transaction_command
    assert command.transaction_id == create_offset_msg_id(STORE_HOST, 4096)
    message = command.message
    assert message.topic == topic  # as the producer names it: its EndTransaction does so too
    assert message.body == b"open"
    sp = message.system_properties
    assert (sp.message_id, sp.message_type, sp.tag) == ("UNIQ1", pb.TRANSACTION, "TagA")
    assert (sp.queue_id, sp.queue_offset) == (2, 7)
    assert dict(message.user_properties) == {"color": "blue"}


def test_a_push_never_waits() -> None:
    outbox = Outbox("client-1")
    command = svc.TelemetryCommand(status=pb.Status(code=pb.OK))
    assert all(outbox.push(command) for _ in range(OUTBOX_LIMIT))
    assert not outbox.push(command)  # full: dropped, the half is checked again later
    assert outbox.queue.qsize() == OUTBOX_LIMIT
    ended = Outbox("client-2")
    ended.closed = True
    assert not ended.push(command)
    assert ended.queue.empty()


def test_a_streams_checkers_leave_only_their_own_registrations() -> None:
    producers = ProducerRegistry(120_000, clock=FakeClock())
    old, new = Outbox("client-1"), Outbox("client-1")
    old_checker = StreamChecker(old, pb.Resource(name="T"))
    new_checker = StreamChecker(new, pb.Resource(name="T"))
    producers.register("T", "client-1", old_checker)
    producers.register("T", "client-1", new_checker)  # the client opened a new stream
    producers.unregister_checker(old_checker)  # the old stream ends
    assert producers.pick("T") is new_checker
    producers.unregister_checker(new_checker)
    assert producers.pick("T") is None
