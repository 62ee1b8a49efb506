"""Message filters applied by get_message: first on the consume-queue tag hash, then on the
record itself (SQL92 filters, added with the broker, implement the same protocol). No I/O here;
tag expressions are parsed by ``pocketmq.protocol.names``."""

from __future__ import annotations

from typing import Protocol

from pocketmq.protocol.names import TagExpression, TagExpressionError, parse_tag_expression


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: bytes) -> bool: ...


class TagFilter:
    """Matches messages whose TAGS hash is one of a tag expression's codes.

    The broker filters by hash only, like RocketMQ; clients recheck the tag string.
    """

    __slots__ = ("codes",)

    def __init__(self, codes: frozenset[int]) -> None:
        self.codes = codes

    @classmethod
    def of(cls, expression: TagExpression) -> TagFilter | None:
        """The filter of a parsed expression; None when it matches every tag."""
        return None if expression.matches_all else cls(expression.codes)

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter | None:
        """``"TagA || TagB"`` -> a filter; ``None``, ``""`` or ``"*"`` -> no filter.

        An expression naming no tag (``"||"``) also gets no filter: a 4.x client refuses to
        send one, and the remoting broker has always served it as ``"*"``.
        """
        try:
            return cls.of(parse_tag_expression(expression))
        except TagExpressionError:
            return None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return tags_code in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True
