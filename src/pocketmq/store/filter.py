"""Message filters applied by get_message: first on the consume-queue tag hash, then on the
record itself (SQL92 filters, added with the broker, implement the same protocol)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pocketmq.protocol.message import tags_code


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: bytes) -> bool: ...


class TagFilter:
    """Matches messages whose TAGS hash is one of the subscribed tags ("*" matches all).

    The broker filters by hash only, like RocketMQ; clients recheck the tag string.
    """

    __slots__ = ("codes",)

    def __init__(self, tags: Iterable[str]) -> None:
        self.codes = frozenset(tags_code(t) for t in tags)

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter | None:
        """``"TagA || TagB"`` -> a filter; ``None``, ``""`` or ``"*"`` -> no filter."""
        if expression is None or expression.strip() in ("", "*"):
            return None
        tags = [t.strip() for t in expression.split("||") if t.strip()]
        return cls(tags) if tags else None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return tags_code in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True
