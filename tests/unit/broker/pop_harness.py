"""A POP service on a real store, with just what the broker gives it; shared by the POP and
receipt-renewal tests.

On a fake clock the revive loop does not run: ``advance`` moves the clock and revives what
fell due, so nothing waits in real time. Without one (the renewal tests) it runs as in a
broker, on the system clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from broker_parts import messaging_for

from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pop import Popped, PopRequest, PopService
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.clock import SYSTEM_CLOCK, FakeClock
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import dlq_topic
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore
from pocketmq.store.config import StoreConfig
from pocketmq.store.filter import TagFilter

TOPIC = "PopTopic"
GROUP = "GID_POP"


class Broker:
    """Just what the POP service needs, reopened on the same directory by ``restart``."""

    def __init__(self, root: Path, max_attempts: int = 3, clock: FakeClock | None = None) -> None:
        self.root = root
        self.max_attempts = max_attempts
        self.clock = clock
        self.open()

    def open(self) -> None:
        clock = self.clock or SYSTEM_CLOCK
        self.store = MessageStore(
            StoreConfig(store_path_root_dir=self.root, mapped_file_size_commit_log=1 << 20),
            clock=clock,
        )
        self.store.open()
        self.topics = TopicConfigManager(
            self.root / "topics.json", cluster="C", broker_name="broker-a", auto_create=True,
            default_queue_nums=2, clock=clock,
        )  # fmt: skip
        self.topics.load()
        self.topics.create_system_if_absent(TOPIC, 2, 6)
        self.offsets = ConsumerOffsetManager(self.root / "offsets.json")
        self.offsets.load()
        messaging = messaging_for(self.root, self.store, self.topics, self.offsets, clock)
        self.pop = PopService(
            self.store, self.offsets, self.topics, "C", "broker-a", lambda _g: self.max_attempts,
            messaging, clock=clock,
        )  # fmt: skip
        self.pop.load()
        self.store.on_message_arrived = lambda topic, _queue_id, _offset: self.pop.notify(topic)

    async def start(self) -> None:
        if self.clock is None:
            await self.pop.start()

    async def advance(self, ms: int) -> int | None:
        """Move the fake clock on by ``ms`` and revive what fell due; returns ms until the next
        deadline."""
        assert self.clock is not None
        self.clock.advance(ms)
        return await self.pop.revive_due()

    async def advance_to(self, epoch_ms: int) -> int | None:
        assert self.clock is not None
        return await self.advance(epoch_ms - self.clock.now_ms())

    async def stop(self, clean: bool = True) -> None:
        await self.pop.stop()
        if clean:
            self.offsets.persist()
        self.store.close()

    async def restart(self, clean: bool = True) -> None:
        await self.stop(clean)
        self.open()
        await self.start()

    async def send(self, body: str, queue_id: int = 0, tags: str = "A") -> None:
        msg = MessageExt(
            TOPIC, body.encode(), queue_id=queue_id,
            properties={MessageConst.TAGS: tags, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: body},
        )  # fmt: skip
        assert (await self.store.put_messages([msg])).ok

    async def receive(
        self, n: int = 32, invisible_ms: int = 300, fifo: bool = False, poll_ms: int = 0,
        tags: str | None = None,
    ) -> list[Popped]:  # fmt: skip
        req = PopRequest(
            group=GROUP, topic=TOPIC, max_nums=n, invisible_ms=invisible_ms,
            tags=TagFilter.parse(tags), tag_set=frozenset([tags]) if tags else None, fifo=fifo,
            max_attempts=self.max_attempts,
        )  # fmt: skip
        return await self.pop.pop(req, poll_ms)

    def stored(self, topic: str) -> list[MessageExt]:
        """Every message of ``topic``'s queue 0."""
        result = self.store.get_message(topic, 0, 0, 32)
        return [decode_message(m) for m in result.messages]

    def dlq(self) -> list[MessageExt]:
        return self.stored(dlq_topic(GROUP))


@asynccontextmanager
async def running(b: Broker) -> AsyncIterator[Broker]:
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """On the system clock, with the revive loop running."""
    async with running(Broker(tmp_path)) as b:
        yield b


def bodies(popped: list[Popped]) -> list[str]:
    return [p.msg.body.decode() for p in popped]


async def until_popped(b: Broker, want: int, **kw: object) -> list[Popped]:
    """Receive until ``want`` messages came back (each waits for an arrival, no sleeps)."""
    got: list[Popped] = []
    async with asyncio.timeout(10):
        while len(got) < want:
            got += await b.receive(poll_ms=2000, **kw)  # type: ignore[arg-type]
    return got
