"""A POP service on a real store, with just what the broker gives it; shared by the POP and
receipt-renewal tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pop import Popped, PopRequest, PopService
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.store import MessageStore
from pocketmq.store.config import StoreConfig
from pocketmq.store.filter import TagFilter

TOPIC = "PopTopic"
GROUP = "GID_POP"


class Broker:
    """Just what the POP service needs, reopened on the same directory by ``restart``."""

    def __init__(self, root: Path, max_attempts: int = 3) -> None:
        self.root = root
        self.max_attempts = max_attempts
        self.open()

    def open(self) -> None:
        self.store = MessageStore(
            StoreConfig(store_path_root_dir=self.root, mapped_file_size_commit_log=1 << 20)
        )
        self.store.open()
        self.topics = TopicConfigManager(
            self.root / "topics.json", cluster="C", broker_name="broker-a", auto_create=True,
            default_queue_nums=2,
        )  # fmt: skip
        self.topics.load()
        self.topics.create_system_if_absent(TOPIC, 2, 6)
        self.offsets = ConsumerOffsetManager(self.root / "offsets.json")
        self.offsets.load()
        self.pop = PopService(
            self.store, self.offsets, self.topics, "C", "broker-a", lambda _g: self.max_attempts
        )
        self.pop.load()
        self.store.on_message_arrived = self.pop.on_message_arrived

    async def start(self) -> None:
        await self.pop.start()

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

    def dlq(self) -> list[bytes]:
        result = self.store.get_message(f"%DLQ%{GROUP}", 0, 0, 32)
        return [m for m in result.messages]


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(tmp_path)
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


def bodies(popped: list[Popped]) -> list[str]:
    return [p.msg.body.decode() for p in popped]


async def until_popped(b: Broker, want: int, **kw: object) -> list[Popped]:
    """Receive until ``want`` messages came back (each waits for an arrival, no sleeps)."""
    got: list[Popped] = []
    async with asyncio.timeout(10):
        while len(got) < want:
            got += await b.receive(poll_ms=2000, **kw)  # type: ignore[arg-type]
    return got
