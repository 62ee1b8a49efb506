"""Transactional messages: half messages, their commit or rollback, and the check-back of
open transactions with the producers of their group (RocketMQ's broker/transaction)."""

from pocketmq.broker.transaction.producers import (
    CheckRequest,
    ProducerRegistry,
    RemotingChecker,
    TransactionChecker,
)
from pocketmq.broker.transaction.service import EndTransaction, TransactionService

__all__ = [
    "CheckRequest",
    "EndTransaction",
    "ProducerRegistry",
    "RemotingChecker",
    "TransactionChecker",
    "TransactionService",
]
