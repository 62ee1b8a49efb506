"""PushConsumer: calls the application's listener with what its queues pull
(DefaultMQPushConsumer with ConsumeMessageConcurrentlyService; orderly.py is the orderly one).

A failed batch goes back to its broker (CONSUMER_SEND_MSG_BACK); if the broker cannot take it,
straight to the group's retry topic through an inner producer; failing both, it is consumed
here again after ``resubmit_delay_s``.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Unpack

from pocketmq.client.consumer_config import MessageModel, PushConsumerConfig, PushConsumerOptions
from pocketmq.client.instance import ClientInstance
from pocketmq.client.orderly import OrderlyService, is_success
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.producer import Message, Producer
from pocketmq.client.rebalance import RebalancingConsumer
from pocketmq.client.route import MessageQueue
from pocketmq.errors import ClientError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import FIRST_RETRY_DELAY_LEVEL, retry_topic

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


@dataclass(slots=True)
class ConsumeContext:
    """What a listener may read and set about the batch it consumes.

    ``ack_index``: on success, messages after this index are still treated as failed (sent
    back for a retry); ``delay_level``: the delay level of those retries (0: the broker's
    choice, RocketMQ's 3 + times already retried).
    """

    message_queue: MessageQueue
    ack_index: int
    delay_level: int = 0


Listener = Callable[
    [list[MessageExt], ConsumeContext], "ConsumeResult | Awaitable[ConsumeResult | None] | None"
]


def _is_async(listener: Listener) -> bool:
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - an object with async __call__
    )


class PushConsumer(RebalancingConsumer):
    """Calls a listener with the messages of the queues this client holds, up to
    ``consume_concurrency`` batches at once. An ``async def`` listener runs on the event loop;
    a plain function runs in a thread pool of that size, as RocketMQ's consume threads.

    A batch the listener fails (RECONSUME_LATER, an exception, None) is sent back to the broker
    for a later retry (clustering), or dropped with a warning (broadcasting), as RocketMQ does.
    """

    config: PushConsumerConfig

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str] = "127.0.0.1:9876",
        *,
        listener: Listener | None = None,
        instance: ClientInstance | None = None,
        **options: Unpack[PushConsumerOptions],
    ) -> None:
        """The settings of PushConsumerConfig come as keyword arguments.

        Raises:
            ClientError: a blank group, or a concurrency or batch size below 1.
        """
        config = PushConsumerConfig(**options)
        super().__init__(group, namesrv_addr, config, instance)
        if config.consume_concurrency < 1 or config.consume_batch_max_size < 1:
            raise ClientError("consume_concurrency and consume_batch_max_size must be >= 1")
        self.listener = listener
        self._sem = asyncio.Semaphore(config.consume_concurrency)
        self._consuming: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._retry_producer: Producer | None = None
        self.orderly = OrderlyService(self) if config.orderly else None

    def register_listener(self, listener: Listener) -> None:
        self.listener = listener

    async def start(self) -> None:
        """Raises: ClientError: no listener or no subscription."""
        if self._running:
            return
        if self.listener is None:
            raise ClientError("messageListener is null")
        if not self.subscriptions:
            raise ClientError("no subscription: call subscribe(topic, expression) first")
        if not _is_async(self.listener):
            self._executor = ThreadPoolExecutor(
                self.config.consume_concurrency, thread_name_prefix=f"consume-{self.group}"
            )
        if self.config.message_model is MessageModel.CLUSTERING:
            self._retry_producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
            await self._retry_producer.start()
        await self._start_base()
        if self.orderly is not None and self.config.message_model is MessageModel.CLUSTERING:
            self._tasks.append(asyncio.create_task(self.orderly.lock_loop()))

    async def shutdown(self) -> None:
        if not self._running:
            return
        await self._stop_base()
        if self._consuming:
            await asyncio.wait(set(self._consuming), timeout=self.config.await_termination_s)
        for task in list(self._consuming):
            task.cancel()
        if self._retry_producer is not None:
            await self._retry_producer.shutdown()
        await self._close_base()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        return self._running

    def track(self, task: asyncio.Task[None]) -> None:
        """Keep a consume task until it ends, so that shutdown can wait for it."""
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)

    # ------------------------------------------------------------------ rebalance hooks

    async def _may_take(self, mq: MessageQueue) -> bool:
        return True if self.orderly is None else await self.orderly.may_take(mq)

    def _queue_started(self, pq: ProcessQueue) -> None:
        if self.orderly is not None:
            self.orderly.start_queue(pq)

    async def _released(self, pq: ProcessQueue) -> None:
        if self.orderly is not None:
            await self.orderly.released(pq)

    async def _after_release(self, mq: MessageQueue) -> None:
        if self.orderly is not None and self.config.message_model is MessageModel.CLUSTERING:
            await self.orderly.unlock([mq])

    # ------------------------------------------------------------------ consuming

    def on_pulled(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self.orderly is not None:
            pq.arrived.set()
            return
        size = self.config.consume_batch_max_size
        for i in range(0, len(msgs), size):
            self._submit(pq, msgs[i : i + size])

    def _submit(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        self.track(asyncio.create_task(self._consume(pq, batch)))

    async def _call_listener(self, batch: list[MessageExt], ctx: ConsumeContext) -> Any:
        assert self.listener is not None
        if self._executor is None:
            return await self.listener(batch, ctx)  # type: ignore[misc]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.listener, batch, ctx)

    async def consume_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the listener's verdict on one message an admin picked,
        outside any queue, so no offset moves and no retry is sent
        (ConsumeMessageDirectlyResult: CR_SUCCESS, CR_LATER, CR_RETURN_NULL or
        CR_THROW_EXCEPTION, and how long it took)."""
        ctx = ConsumeContext(MessageQueue(msg.topic, broker_name, msg.queue_id), ack_index=0)
        clock = self.instance.clock
        begin_ms = clock.now_ms()
        remark = None
        try:
            status = await self._call_listener([msg], ctx)
        except Exception as exc:  # the admin is told what the listener raised
            result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
        else:
            if status is None:
                result = "CR_RETURN_NULL"
            elif is_success(status):
                result = "CR_SUCCESS"
            else:
                result = "CR_LATER"
        return {
            "order": self.orderly is not None,
            "autoCommit": True,
            "consumeResult": result,
            "remark": remark,
            "spentTimeMills": clock.now_ms() - begin_ms,
        }

    async def run_listener(
        self, pq: ProcessQueue, batch: list[MessageExt], ctx: ConsumeContext | None = None
    ) -> Any:
        """The listener's answer for a batch; None if it raised or ran past the consume
        timeout (an async listener is cancelled then; a thread's result is ignored)."""
        start_ms = str(self.instance.clock.now_ms())
        for m in batch:
            m.properties[MessageConst.CONSUME_START_TIMESTAMP] = start_ms
        try:
            async with asyncio.timeout(self.config.consume_timeout_s):
                return await self._call_listener(
                    batch, ctx or ConsumeContext(pq.mq, ack_index=len(batch) - 1)
                )
        except TimeoutError:
            log.warning("the listener of %s took over %.0f s on %s: counted as failed",
                        self.group, self.config.consume_timeout_s, pq.mq)  # fmt: skip
        except Exception:
            log.exception("the listener of %s failed on %s", self.group, pq.mq)
        return None

    async def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        async with self._sem:
            if pq.dropped or not self._running:
                return
            ctx = ConsumeContext(pq.mq, ack_index=len(batch) - 1)
            status = await self.run_listener(pq, batch, ctx)
        if not isinstance(status, ConsumeResult):
            status = ConsumeResult.RECONSUME_LATER
        if pq.dropped:
            return  # the queue moved to another consumer, which consumes these again
        ack = ctx.ack_index if status is ConsumeResult.CONSUME_SUCCESS else -1
        failed = batch[max(ack + 1, 0) :]
        unsent: list[MessageExt] = []
        if failed and self.config.message_model is MessageModel.BROADCASTING:
            log.warning("broadcast consume of %d message(s) failed, dropped", len(failed))
        elif failed:
            for m in failed:
                if not await self._send_back(pq.mq, m, ctx.delay_level):
                    m.reconsume_times += 1
                    unsent.append(m)
        offset = pq.remove([m for m in batch if all(m is not u for u in unsent)])
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(pq.mq, offset, increase_only=True)
        if unsent:
            # Neither the broker nor a direct send took them: consume them here again later.
            asyncio.get_running_loop().call_later(
                self.config.resubmit_delay_s, self._resubmit, pq, unsent
            )

    def _resubmit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._running and not pq.dropped:
            self._submit(pq, msgs)

    async def _send_back(self, mq: MessageQueue, m: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK, or failing that a direct send to the retry topic."""
        addr = self.instance.master_addr(mq.broker_name)
        try:
            if addr is None:
                raise ClientError(f"The broker[{mq.broker_name}] not exist")
            await self.instance.invoke(
                addr,
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {
                    "offset": m.phy_offset,
                    "group": self.group,
                    "delayLevel": delay_level,
                    "originMsgId": m.msg_id,
                    "originTopic": m.topic,
                    "unitMode": False,
                    "maxReconsumeTimes": self.config.max_reconsume,
                },
            )
            return True
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.info("send back of %s to %s failed (%s), sending it to the retry topic",
                     m.msg_id, addr, exc)  # fmt: skip
        return await self.send_to_retry_topic(m, m.reconsume_times + 1)

    async def send_to_retry_topic(self, m: MessageExt, reconsume_times: int) -> bool:
        """Send a copy to the group's retry topic through the inner producer; the broker moves
        it to the dead letter queue when past the maximum or when the group is ordered."""
        if self._retry_producer is None:
            return False
        props = dict(m.properties)
        props[MessageConst.ORIGIN_MESSAGE_ID] = props.get(MessageConst.ORIGIN_MESSAGE_ID, m.msg_id)
        props[MessageConst.RETRY_TOPIC] = m.topic
        props[MessageConst.RECONSUME_TIME] = str(reconsume_times)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(self.config.max_reconsume)
        props[MessageConst.DELAY_TIME_LEVEL] = str(FIRST_RETRY_DELAY_LEVEL + m.reconsume_times)
        props.pop(MessageConst.CONSUME_START_TIMESTAMP, None)
        try:
            await self._retry_producer.send(Message(retry_topic(self.group), m.body, m.flag, props))
            return True
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot send %s to the retry topic: %s", m.msg_id, exc)
            return False
