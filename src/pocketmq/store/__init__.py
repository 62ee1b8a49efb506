"""The storage engine: a RocketMQ 4.x compatible CommitLog, consume queues and index."""

from pocketmq.store.config import FlushDiskType, StoreConfig
from pocketmq.store.filter import MessageFilter, SqlFilter, TagFilter
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetResult, GetStatus, PutResult, PutStatus, QueryResult

__all__ = [
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "QueryResult",
    "SqlFilter",
    "StoreConfig",
    "TagFilter",
]
