"""A send is made in the read that brought it (SendHandlers.send_message): alone in its read,
it is answered before the read's callback returns, with no task of its own; the sends read
together are one run (SendHandlers.send_run), stored in one put in the read, each with its own
answer (no task either), and the read's answers go out in one write. A run's sends that a rule
touches, or that are refused, are answered as alone, in their place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fake_transport import FakeTransport, connected_channel
from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.handlers import send as send_handlers
from pocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.protocol.names import PERM_READ_WRITE, SCHEDULE_TOPIC
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import FLAG_ONEWAY, RemotingCommand
from pocketmq.remoting import RemotingChannel
from pocketmq.store.config import FlushDiskType, StoreConfig

TOPIC = "EagerTopic"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(BrokerConfig(listen_port=0, store=StoreConfig(store_path_root_dir=tmp_path)))
    await b.start()
    b.topics.create_system_if_absent(TOPIC, 1, PERM_READ_WRITE)
    try:
        yield b
    finally:
        await b.stop()


def send_frame(
    opaque: int, *, topic: str = TOPIC, queue_id: int = 0, properties: str = "",
    oneway: bool = False,
) -> bytes:  # fmt: skip
    """A SEND_MESSAGE_V2 as a 4.x producer writes it (one-letter header names)."""
    return RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2, language=LanguageCode.JAVA, opaque=opaque,
        flag=FLAG_ONEWAY if oneway else 0,
        ext_fields={"a": "P", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
                    "g": "1795567224818", "h": "0",
                    "i": f"UNIQ_KEY\x01K{opaque}\x02{properties}",
                    "j": "0", "k": "false", "m": "false"},
        body=b"body-%d" % opaque,
    ).encode()  # fmt: skip


def phy_offset(answer: RemotingCommand) -> int:
    """Where the answered send's record is in the CommitLog (the end of its offset msg id)."""
    return int(answer.ext_fields["msgId"][-16:], 16)


async def read(channel: RemotingChannel, transport: FakeTransport, data: bytes) -> int:
    """Deliver ``data`` as the loop delivers a read (from a callback, in no task); the
    number of frames written back before that callback returned."""
    loop = asyncio.get_running_loop()
    written: asyncio.Future[int] = loop.create_future()

    def deliver() -> None:
        channel.data_received(data)
        written.set_result(len(transport.commands()))

    loop.call_soon(deliver)
    return await written


async def test_a_lone_send_is_answered_in_the_read_that_brought_it(broker: Broker) -> None:
    assert broker.server is not None
    channel, transport = connected_channel(broker.server.handler)
    for opaque in (1, 2, 3):
        assert await read(channel, transport, send_frame(opaque)) == opaque
        assert not channel._tasks
    answers = transport.commands()
    assert [(c.opaque, c.code) for c in answers] == [(i, ResponseCode.SUCCESS) for i in (1, 2, 3)]
    assert [int(c.ext_fields["queueOffset"]) for c in answers] == [0, 1, 2]


async def test_sends_read_together_are_each_answered_after_one_put(broker: Broker) -> None:
    assert broker.server is not None
    channel, transport = connected_channel(broker.server.handler)
    puts: list[int] = []
    store = broker.store
    append_units = store.append_units

    def counted(units: list[list[object]]) -> object:
        puts.append(len(units))
        return append_units(units)  # type: ignore[arg-type]

    store.coalescer._append_units = counted  # type: ignore[assignment]
    frames = b"".join(send_frame(opaque) for opaque in range(1, 9))
    # All eight answered in the read, with no task each, and written together once it ends.
    assert await read(channel, transport, frames) == 0
    assert not channel._tasks
    await asyncio.sleep(0)
    assert transport.writes == 1
    answers = transport.commands()
    assert sorted((c.opaque, c.code) for c in answers) == [
        (i, ResponseCode.SUCCESS) for i in range(1, 9)
    ]
    assert sorted(int(c.ext_fields["queueOffset"]) for c in answers) == list(range(8))
    assert puts == [8]  # one put for the run


@pytest.mark.parametrize("broken", ["answer", "count"])
async def test_held_sends_whose_answer_or_count_fails_are_refused_not_left_waiting(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    assert broker.server is not None
    channel, transport = connected_channel(broker.server.handler)

    def fails(*args: object) -> None:
        raise RuntimeError("broken")

    if broken == "answer":
        monkeypatch.setattr(send_handlers, "put_response", fails)
    else:
        monkeypatch.setattr(broker.messaging.stats, "on_put", fails)
    # Each refused, in the read: none waits.
    await read(channel, transport, b"".join(send_frame(opaque) for opaque in range(1, 5)))
    await asyncio.sleep(0)
    assert sorted((c.opaque, c.code) for c in transport.commands()) == [
        (i, ResponseCode.SYSTEM_ERROR) for i in range(1, 5)
    ]


async def test_a_runs_ruled_and_refused_sends_are_answered_as_alone_in_their_place(
    broker: Broker,
) -> None:
    assert broker.server is not None
    channel, transport = connected_channel(broker.server.handler)
    frames = [
        send_frame(1),
        send_frame(2, properties="DELAY\x013\x02"),  # the delay rule: parked in its topic
        send_frame(3),
        send_frame(4, queue_id=5),  # a queue the topic does not have: refused
        send_frame(5, topic="SCHEDULE_TOPIC_XXXX"),  # a system topic: refused
        send_frame(6, oneway=True),  # stored, never answered
        send_frame(7, topic="%RETRY%G"),  # a retry topic's rules (its group made on demand)
        send_frame(8),
    ]
    await read(channel, transport, b"".join(frames))
    await asyncio.sleep(0)
    answers = {c.opaque: c for c in transport.commands()}
    assert sorted(answers) == [1, 2, 3, 4, 5, 7, 8]
    assert {o: answers[o].code for o in answers} == {
        1: ResponseCode.SUCCESS, 2: ResponseCode.SUCCESS, 3: ResponseCode.SUCCESS,
        4: ResponseCode.SYSTEM_ERROR, 5: ResponseCode.NO_PERMISSION,
        7: ResponseCode.SUCCESS, 8: ResponseCode.SUCCESS,
    }  # fmt: skip
    assert "queueId[5] is illegal" in (answers[4].remark or "")
    # Stored in the order they came, the ruled one among the plain ones.
    stored = [phy_offset(answers[o]) for o in (1, 2, 3, 7, 8)]
    assert stored == sorted(stored)
    queue = broker.store.get_message(TOPIC, 0, 0, 32)
    bodies = [decode_message(raw).body for raw in queue.messages]
    assert bodies == [b"body-1", b"body-3", b"body-6", b"body-8"]
    assert [int(answers[o].ext_fields["queueOffset"]) for o in (1, 3, 8)] == [0, 1, 3]
    assert broker.store.get_message(SCHEDULE_TOPIC, 2, 0, 32).message_count == 1  # level 3
    assert broker.store.get_message("%RETRY%G", 0, 0, 32).message_count == 1


async def test_a_run_made_after_another_put_of_the_iteration_is_held_behind_it(
    broker: Broker,
) -> None:
    assert broker.server is not None
    first, first_out = connected_channel(broker.server.handler)
    second, second_out = connected_channel(broker.server.handler)
    loop = asyncio.get_running_loop()
    both: asyncio.Future[None] = loop.create_future()

    def reads() -> None:  # two connections' reads in one turn of the loop
        first.data_received(b"".join(send_frame(o) for o in (1, 2, 3)))
        second.data_received(b"".join(send_frame(o) for o in (4, 5, 6)))
        both.set_result(None)

    loop.call_soon(reads)
    await both
    await asyncio.sleep(0)  # the turn's end: the held run appended and answered
    await asyncio.sleep(0)
    offsets = {c.opaque: int(c.ext_fields["queueOffset"])
               for c in first_out.commands() + second_out.commands()}  # fmt: skip
    assert offsets == {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}


async def test_sends_of_a_run_are_durable_when_answered_under_sync_flush(tmp_path: Path) -> None:
    store = StoreConfig(store_path_root_dir=tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    b = Broker(BrokerConfig(listen_port=0, store=store))
    await b.start()
    try:
        b.topics.create_system_if_absent(TOPIC, 1, PERM_READ_WRITE)
        assert b.server is not None
        channel, transport = connected_channel(b.server.handler)
        await read(channel, transport, b"".join(send_frame(o) for o in range(1, 9)))
        for _ in range(500):  # the flush thread's answer; a guard against a hang
            if len(transport.commands()) == 8:
                break
            await asyncio.sleep(0.01)
        answers = transport.commands()
        assert [c.code for c in answers] == [ResponseCode.SUCCESS] * 8
        durable = b.store.commitlog.mfq.flushed_where
        assert all(phy_offset(c) < durable for c in answers)
    finally:
        await b.stop()
