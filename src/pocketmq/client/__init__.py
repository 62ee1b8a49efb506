"""pocketmq's client for the 4.x remoting protocol: asyncio first, with a blocking facade.

async with Producer("pg", "127.0.0.1:9876") as producer:
    result = await producer.send(message("TopicTest", b"hello", tags="TagA"))
"""

from pocketmq.client.allocate import allocate_averagely, allocate_by_circle
from pocketmq.client.blocking import (
    BlockingLitePullConsumer,
    BlockingProducer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
)
from pocketmq.client.consumer_config import ConsumeFromWhere, MessageModel
from pocketmq.client.lite_pull import LitePullConsumer
from pocketmq.client.orderly import ConsumeOrderlyStatus
from pocketmq.client.producer import (
    Message,
    Producer,
    SendResult,
    SendStatus,
    message,
    select_by_hash,
)
from pocketmq.client.pull import MessageSelector
from pocketmq.client.push_consumer import ConsumeContext, ConsumeResult, PushConsumer
from pocketmq.client.request_reply import reply_message
from pocketmq.client.route import MessageQueue
from pocketmq.client.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.message import MessageExt

__all__ = [
    "BlockingLitePullConsumer",
    "BlockingProducer",
    "BlockingPushConsumer",
    "BlockingTransactionProducer",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeResult",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_by_circle",
    "message",
    "reply_message",
    "select_by_hash",
]
