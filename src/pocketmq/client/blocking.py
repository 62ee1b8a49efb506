"""Blocking facade for scripts: the asyncio clients run on an event loop in a background
thread, and each call waits for its result.

    with BlockingProducer("pg", "127.0.0.1:9876") as producer:
        producer.send(message("TopicTest", b"hello", tags="TagA"))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

from pocketmq.client.lite_pull import LitePullConsumer
from pocketmq.client.producer import Message, MessageQueueSelector, Producer, SendResult
from pocketmq.client.push_consumer import ConsumeContext, ConsumeResult, PushConsumer
from pocketmq.client.rebalance import RebalancingConsumer
from pocketmq.client.route import MessageQueue
from pocketmq.client.transaction import (
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from pocketmq.protocol.message import MessageExt

T = TypeVar("T")


class _AsyncClient(Protocol):
    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


C = TypeVar("C", bound=_AsyncClient)
K = TypeVar("K", bound=RebalancingConsumer)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = _new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _build(factory: Callable[[], T]) -> T:
    # Clients create asyncio primitives: build them on their own loop.
    return factory()


class _Blocking(Generic[C]):
    """An asyncio client built and run on its own loop thread; shutdown stops the thread."""

    def __init__(self, thread_name: str, factory: Callable[[], C]) -> None:
        self._loop = _LoopThread(thread_name)
        self._client = self._loop.run(_build(factory))

    def start(self) -> None:
        self._loop.run(self._client.start())

    def shutdown(self) -> None:
        try:
            self._loop.run(self._client.shutdown())
        finally:
            self._loop.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class BlockingProducer(_Blocking[Producer]):
    def __init__(self, group: str, namesrv_addr: str | list[str], **options: Any) -> None:
        super().__init__(f"producer-{group}", lambda: Producer(group, namesrv_addr, **options))

    @property
    def producer(self) -> Producer:
        return self._client

    def send(
        self,
        msg: Message,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        return self._loop.run(
            self.producer.send(msg, selector=selector, arg=arg, queue=queue, timeout_ms=timeout_ms)
        )

    def send_async(
        self,
        msg: Message,
        on_success: Callable[[SendResult], None] | None = None,
        on_exception: Callable[[BaseException], None] | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return at once; the callbacks run on the client's loop thread."""
        fut = self._loop.submit(self.producer.send_async(msg))

        def done(f: concurrent.futures.Future[SendResult]) -> None:
            exc = f.exception()
            if exc is not None:
                if on_exception is not None:
                    on_exception(exc)
            elif on_success is not None:
                on_success(f.result())

        fut.add_done_callback(done)
        return fut

    def send_oneway(self, msg: Message) -> None:
        self._loop.run(self.producer.send_oneway(msg))

    def send_batch(self, messages: Sequence[Message]) -> SendResult:
        return self._loop.run(self.producer.send_batch(messages))

    def request(self, msg: Message, timeout_ms: int | None = None) -> MessageExt:
        """Send a request and wait for its reply; see Producer.request."""
        return self._loop.run(self.producer.request(msg, timeout_ms))

    def reply(
        self, request: MessageExt, body: bytes | str, properties: dict[str, str] | None = None
    ) -> SendResult:
        """Answer a request message (from a consume thread too); see Producer.reply."""
        return self._loop.run(self.producer.reply(request, body, properties))


class BlockingTransactionProducer(BlockingProducer):
    """A TransactionProducer; the listener's plain methods run on worker threads, its
    ``async def`` ones on the client's loop thread."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        listener: TransactionListener | None = None,
        **options: Any,
    ) -> None:
        _Blocking.__init__(
            self,
            f"tx-producer-{group}",
            lambda: TransactionProducer(group, namesrv_addr, listener=listener, **options),
        )

    @property
    def transaction_producer(self) -> TransactionProducer:
        assert isinstance(self._client, TransactionProducer)
        return self._client

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        return self._loop.run(self.transaction_producer.send_message_in_transaction(msg, arg))


class _BlockingConsumer(_Blocking[K]):
    @property
    def consumer(self) -> K:
        return self._client

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self.consumer.subscribe(topic, expression)


class BlockingPushConsumer(_BlockingConsumer[PushConsumer]):
    """The listener is a plain function, called on consume threads."""

    def __init__(self, group: str, namesrv_addr: str | list[str], **options: Any) -> None:
        super().__init__(f"consumer-{group}", lambda: PushConsumer(group, namesrv_addr, **options))

    def register_listener(
        self, listener: Callable[[list[MessageExt], ConsumeContext], ConsumeResult | None]
    ) -> None:
        self.consumer.register_listener(listener)


class BlockingLitePullConsumer(_BlockingConsumer[LitePullConsumer]):
    def __init__(self, group: str, namesrv_addr: str | list[str], **options: Any) -> None:
        super().__init__(
            f"lite-pull-{group}", lambda: LitePullConsumer(group, namesrv_addr, **options)
        )

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self.consumer.assign(queues)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self.consumer.fetch_message_queues(topic))

    def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        return self._loop.run(self.consumer.poll(timeout_s))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._loop.run(self.consumer.seek(mq, offset))

    def commit_sync(self) -> None:
        self._loop.run(self.consumer.commit_sync())

    def committed(self, mq: MessageQueue) -> int:
        return self._loop.run(self.consumer.committed(mq))
