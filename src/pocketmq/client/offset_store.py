"""Where a consumer keeps its progress: on the brokers (clustering) or in a local file
(broadcasting), as RocketMQ's RemoteBrokerOffsetStore and LocalFileOffsetStore.

Both keep the offsets in memory, updated after each consumed batch, and persist them every
``persist_consumer_offset_interval`` (5 s) and on shutdown. An offset is the next message to
consume, so a restart resumes after the last message acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from pocketmq.client.instance import ClientInstance
from pocketmq.client.route import MessageQueue
from pocketmq.errors import BrokerError, ClientError, PocketMQError
from pocketmq.jsonfile import read_json, write_json_atomic
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import MASTER_ID

log = logging.getLogger(__name__)


class OffsetStore(Protocol):
    offsets: dict[MessageQueue, int]

    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...

    async def read_from_store(self, mq: MessageQueue) -> int:
        """The persisted offset, -1 if none. Raises ClientError if it cannot be read."""
        ...

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...


class _MemoryOffsets:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offsets.get(mq)
        if old is None or not increase_only or offset > old:
            self.offsets[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)


class RemoteOffsetStore(_MemoryOffsets):
    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        return None

    async def _addr(self, mq: MessageQueue) -> str:
        """The master of the queue's broker, else (its route fetched again) a slave of it, as
        RemoteBrokerOffsetStore reads and commits.

        Raises:
            ClientError: no broker of that name.
        """
        found = await self.instance.find_broker_in_subscribe(
            mq.topic, mq.broker_name, MASTER_ID, True
        )
        if found is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        return found.addr

    async def read_from_store(self, mq: MessageQueue) -> int:
        try:
            resp = await self.instance.invoke(
                await self._addr(mq),
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id},
                ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
            )
        except (ConnectionError, TimeoutError) as exc:
            raise ClientError(f"cannot query the offset of {mq}: {exc}") from exc
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        offset = int(resp.ext_fields.get("offset", -1))
        self.update(mq, offset, increase_only=False)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        async def one(mq: MessageQueue, offset: int) -> None:
            try:
                await self.instance.invoke(
                    await self._addr(mq),
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": self.group,
                        "topic": mq.topic,
                        "queueId": mq.queue_id,
                        "commitOffset": offset,
                    },
                )
            except (BrokerError, ClientError, ConnectionError, TimeoutError) as exc:
                log.warning("cannot persist the offset %d of %s: %s", offset, mq, exc)

        wanted = set(mqs)
        await asyncio.gather(
            *(one(mq, off) for mq, off in list(self.offsets.items()) if mq in wanted)
        )


def default_local_offset_dir() -> Path:
    return Path.home() / ".rocketmq_offsets"


class LocalOffsetStore(_MemoryOffsets):
    """offsets.json under ``{dir}/{client id}/{group}/``, written atomically."""

    def __init__(self, base_dir: Path, client_id: str, group: str) -> None:
        super().__init__()
        self.path = base_dir / client_id.replace(":", "_") / group / "offsets.json"

    def _read_file(self) -> dict[MessageQueue, int]:
        try:
            data = read_json(self.path)
        except PocketMQError as exc:
            raise ClientError(f"cannot read local offsets {self.path}: {exc}") from exc
        if not data:
            return {}
        try:
            return {
                MessageQueue.from_json(item): int(item["offset"])
                for item in data.get("offsetTable", [])
            }
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ClientError(f"malformed local offsets {self.path}: {exc}") from exc

    async def load(self) -> None:
        self.offsets.update(await asyncio.to_thread(self._read_file))

    async def read_from_store(self, mq: MessageQueue) -> int:
        """The offset the file holds (LocalFileOffsetStore's READ_FROM_STORE): a queue taken
        again after a rebalance or a restart starts where this client last persisted it, not
        from what memory dropped when the queue was released."""
        offset = (await asyncio.to_thread(self._read_file)).get(mq)
        if offset is None:
            return -1
        self.update(mq, offset, increase_only=False)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        table = [
            {**mq.to_json(), "offset": off}
            for mq, off in sorted(self.offsets.items())
            if mq in wanted
        ]
        if not table:
            return
        try:
            await asyncio.to_thread(write_json_atomic, self.path, {"offsetTable": table})
        except PocketMQError as exc:
            log.warning("cannot persist local offsets to %s: %s", self.path, exc)
