"""LitePullConsumer: the application polls (DefaultLitePullConsumer).

Queues come from a subscription (rebalanced within the group like a push consumer) or from
``assign``. Background pull tasks fill a buffer that ``poll`` drains; a polled message counts as
consumed. With ``auto_commit`` its offset is committed by the next persist (every 5 s) and on
shutdown; without it, ``commit_sync`` commits what was polled.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Unpack

from pocketmq.client.consumer_config import ConsumerConfig, ConsumerOptions
from pocketmq.client.instance import ClientInstance
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.pull import Subscription
from pocketmq.client.rebalance import RebalancingConsumer
from pocketmq.client.route import MessageQueue
from pocketmq.errors import ClientError
from pocketmq.protocol.message import MessageExt

# DefaultLitePullConsumer's pullBatchSize (the push consumer's is 32).
LITE_PULL_BATCH_SIZE = 10


def _timed_out(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class LitePullConsumer(RebalancingConsumer):
    consume_type = "CONSUME_ACTIVELY"
    consumes_retry_topic = False

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str] = "127.0.0.1:9876",
        *,
        auto_commit: bool = True,
        instance: ClientInstance | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        """The settings of ConsumerConfig come as keyword arguments too.

        Raises:
            ClientError: a blank group.
        """
        options.setdefault("pull_batch_size", LITE_PULL_BATCH_SIZE)
        super().__init__(group, namesrv_addr, ConsumerConfig(**options), instance)
        self.auto_commit = auto_commit
        self._assigned: set[MessageQueue] | None = None
        # Pulled batches in the order they came; polls waiting for one park a future here.
        self._buffer: deque[tuple[ProcessQueue, list[MessageExt]]] = deque()
        self._waiters: list[asyncio.Future[bool]] = []
        self._polled: dict[MessageQueue, int] = {}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Raises: ClientError: neither subscribed nor assigned; BrokerError: a broker refuses
        a SQL92 subscription (CHECK_CLIENT_CONFIG)."""
        if self._running:
            return
        if not self.subscriptions:
            raise ClientError("no subscription: call subscribe() or assign() first")
        await self._check_client_config()
        await self._start_base()

    async def shutdown(self) -> None:
        if not self._running:
            # Never started, it may still have asked the NameServer (fetch_message_queues):
            # an instance of its own closes those connections.
            if self._own_instance:
                await self.instance.close()
            return
        await self._stop_base()
        if self.auto_commit:
            self._commit_polled()
        await self._close_base()

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Pull exactly these queues: no rebalance, the group's other members are ignored."""
        self._assigned = set(queues)
        for mq in self._assigned:
            self.subscriptions.setdefault(mq.topic, Subscription.parse(mq.topic, "*"))
        if self._running:
            self.rebalance_soon()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Raises: ClientError: the topic has no route."""
        route = await self.instance.update_route(topic)
        if route is None:
            raise ClientError(f"The topic[{topic}] not exist")
        return sorted(route.read_queues)

    async def rebalance(self) -> None:
        if self._assigned is None:
            await super().rebalance()
            return
        self._rebalance_wake.clear()
        for mq in [mq for mq in self.process_queues if mq not in self._assigned]:
            await self._release(mq)
        for mq in sorted(self._assigned - set(self.process_queues)):
            if mq.topic not in self.instance.routes:
                await self._try_update_route(mq.topic)
            await self._take(mq)

    # ------------------------------------------------------------------ polling

    def on_pulled(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        self._buffer.append((pq, msgs))
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(True)

    async def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """The next pulled batch of one queue, or [] if nothing came within timeout_s."""
        if timeout_s <= 0:
            return []
        buffer = self._buffer
        # The clock is read only when the buffer is empty: asyncio.get_running_loop costs a
        # getpid system call, and a poll mostly finds a batch waiting.
        deadline: float | None = None
        while True:
            if not buffer:
                loop = asyncio.get_running_loop()
                if deadline is None:
                    deadline = loop.time() + timeout_s
                remaining = deadline - loop.time()
                if remaining <= 0 or not await self._batch_within(loop, remaining):
                    return []
                continue  # a batch came (unless another poll took it first)
            pq, msgs = buffer.popleft()
            if pq.dropped or self.process_queues.get(pq.mq) is not pq:
                continue  # the queue was released or sought since this batch was pulled
            offset = pq.remove(msgs)
            if offset >= 0:
                self._polled[pq.mq] = offset
                if self.auto_commit:
                    self.offset_store.update(pq.mq, offset, increase_only=True)
            return msgs

    async def _batch_within(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> bool:
        """Whether a batch was pulled within timeout_s. One timer per wait, no
        asyncio.timeout: a poll that finds the buffer empty waits for nearly every batch."""
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout_s, _timed_out, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _commit_polled(self) -> None:
        for mq, offset in self._polled.items():
            self.offset_store.update(mq, offset, increase_only=False)

    async def commit_sync(self) -> None:
        """Commit the offsets of everything polled so far, now."""
        self._commit_polled()
        await self.offset_store.persist_all(list(self.process_queues))

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for the queue (-1 if none)."""
        return await self.offset_store.read_from_store(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Make the next polls of mq start at offset.

        Raises:
            ClientError: mq is not held by this consumer.
        """
        await self.reset_offset(mq, offset)

    async def reset_offset(self, mq: MessageQueue, offset: int) -> None:
        if mq in self.process_queues:
            self._polled.pop(mq, None)
        await super().reset_offset(mq, offset)
