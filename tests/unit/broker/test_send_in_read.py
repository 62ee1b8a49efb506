"""A send is made in the read that brought it (SendHandlers.send_message): alone in its read,
it is answered before the read's callback returns, with no task of its own; the others of a
read are put together when the read's turn ends (PutCoalescer), each with its own answer given
by that put's callback (no task either), and the read's answers go out in one write."""

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
from pocketmq.protocol.names import PERM_READ_WRITE
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel
from pocketmq.store.config import StoreConfig

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


def send_frame(opaque: int) -> bytes:
    """A SEND_MESSAGE_V2 as a 4.x producer writes it (one-letter header names)."""
    return RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2, language=LanguageCode.JAVA, opaque=opaque,
        ext_fields={"a": "P", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
                    "g": "1795567224818", "h": "0", "i": f"UNIQ_KEY\x01K{opaque}\x02",
                    "j": "0", "k": "false", "m": "false"},
        body=b"body-%d" % opaque,
    ).encode()  # fmt: skip


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
    # The first is answered in the read, the other seven by the put that ends the turn, with
    # no task each: all eight in one write, then.
    assert await read(channel, transport, frames) == 0
    assert not channel._tasks
    await asyncio.sleep(0)
    assert transport.writes == 1
    answers = transport.commands()
    assert sorted((c.opaque, c.code) for c in answers) == [
        (i, ResponseCode.SUCCESS) for i in range(1, 9)
    ]
    assert sorted(int(c.ext_fields["queueOffset"]) for c in answers) == list(range(8))
    # The first put alone, in the read; the other seven together when the read's turn ends.
    assert puts == [1, 7]


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
    # The first is refused in the read, the other three by the put's callback: none waits.
    await read(channel, transport, b"".join(send_frame(opaque) for opaque in range(1, 5)))
    await asyncio.sleep(0)
    assert sorted((c.opaque, c.code) for c in transport.commands()) == [
        (i, ResponseCode.SYSTEM_ERROR) for i in range(1, 5)
    ]
