"""A messaging service with its transaction service over a real store on a fake clock, that
can be closed and reopened on the same directory (a restart), and a checker that notes what it
was asked: shared by the transaction unit tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker_parts import messaging_for

from pocketmq.broker.messaging import MessagingService
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.broker.transaction import (
    CheckRequest,
    EndTransaction,
    ProducerRegistry,
    TransactionService,
)
from pocketmq.clock import FakeClock
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store import MessageStore, PutResult
from pocketmq.store.config import StoreConfig

TOPIC = "PayTopic"
GROUP = "PG_PAY"
QUEUES = 2
COMMIT = SysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = SysFlag.TRANSACTION_ROLLBACK_TYPE
UNKNOWN = SysFlag.TRANSACTION_NOT_TYPE


@dataclass
class NotingChecker:
    """Notes each check; a test answers them."""

    asked: list[tuple[MessageExt, CheckRequest]] = field(default_factory=list)

    def check(self, half: MessageExt, request: CheckRequest) -> None:
        self.asked.append((half, request))


class Broker:
    """The parts of a broker transactions touch, reopenable on one directory."""

    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.root = root
        self.clock = clock
        self.store = MessageStore(
            StoreConfig(store_path_root_dir=root / "store", mapped_file_size_commit_log=1 << 20),
            clock=clock,
        )
        self.store.open()
        self.topics = TopicConfigManager(
            root / "topics.json", cluster="C", broker_name="broker-a", auto_create=True,
            default_queue_nums=QUEUES,
        )  # fmt: skip
        self.topics.load()
        self.topics.create_system_if_absent(TOPIC, QUEUES, 6)
        self.offsets = ConsumerOffsetManager(root / "consumerOffset.json")
        self.offsets.load()
        self.messaging: MessagingService = messaging_for(
            root, self.store, self.topics, self.offsets, clock
        )
        self.tx: TransactionService = self.messaging.broker.transactions
        self.producers: ProducerRegistry = self.messaging.broker.producers
        self.tx.load()

    def restart(self, *, clean: bool = True) -> Broker:
        """Close (after persisting the offsets when ``clean``) and open again."""
        if clean:
            self.tx.save_progress()
            self.offsets.persist()
        self.store.close()
        return Broker(self.root, self.clock)

    def half(self, uniq: str, *, queue_id: int = 1, **props: str) -> MessageExt:
        return MessageExt(
            topic=TOPIC,
            body=f"body-{uniq}".encode(),
            queue_id=queue_id,
            properties={
                MessageConst.TRANSACTION_PREPARED: "true",
                MessageConst.PRODUCER_GROUP: GROUP,
                MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
                MessageConst.TAGS: "T",
                **props,
            },
            sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE,
            born_timestamp=self.clock.now_ms(),
            store_host=self.messaging.store_host,
        )

    async def send_half(self, uniq: str, **props: str) -> PutResult:
        result = await self.messaging.send(self.half(uniq, **props))
        assert result.ok, result
        return result

    async def end(
        self,
        result: PutResult,
        resolution: int,
        *,
        group: str | None = GROUP,
        from_check: bool = False,
    ) -> None:
        await self.tx.end(
            EndTransaction(
                group, result.phy_offset, result.queue_offset, resolution, from_check, "msg"
            )
        )

    async def answer(self, request: CheckRequest, resolution: int) -> None:
        """End a transaction as a producer answers a check: with the offsets it was given."""
        await self.tx.end(
            EndTransaction(
                GROUP,
                request.commit_log_offset,
                request.tran_state_table_offset,
                resolution,
                True,
                request.msg_id,
            )
        )

    def visible(self) -> list[MessageExt]:
        """What consumers of TOPIC can read, all queues."""
        out = []
        for queue_id in range(QUEUES):
            result = self.store.get_message(TOPIC, queue_id, 0, 100)
            out += [decode_message(raw) for raw in result.messages]
        return out

    def queue(self, topic: str) -> list[MessageExt]:
        result = self.store.get_message(topic, 0, 0, 100)
        return [decode_message(raw) for raw in result.messages]
