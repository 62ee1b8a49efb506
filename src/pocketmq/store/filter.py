"""Message filters applied by get_message: first on the consume-queue tag hash, then on the
record itself. No I/O here; tag expressions are parsed by ``pocketmq.protocol.names``, SQL92
selectors compiled by ``pocketmq.filter``.

RocketMQ can also pre-check a SQL92 selector on the consume queue, with bloom-filter bit maps
that its dispatcher computes per message and consumer group (ConsumeQueueExt). pocketmq does
not: the record check costs a memory copy and a properties decode, and BENCHMARKS.md ("SQL92
filtering") measures why moving the evaluation to dispatch would not pay here.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.filter import Sql92Expression
from pocketmq.protocol.names import TagExpression, TagExpressionError, parse_tag_expression
from pocketmq.protocol.record_properties import RecordProperties


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


class SqlFilter:
    """Matches messages whose properties (TAGS among them) make a SQL92 selector TRUE
    (ExpressionMessageFilter for the SQL92 type): every consume-queue unit passes, and only
    the properties the selector names are decoded from each record."""

    __slots__ = ("expression",)

    def __init__(self, expression: Sql92Expression) -> None:
        self.expression = expression

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return self.expression.matches(RecordProperties(record))


MessageFilter = TagFilter | SqlFilter


def filter_parts(
    message_filter: MessageFilter | None,
) -> tuple[frozenset[int] | None, Callable[[bytes], bool] | None]:
    """What the pull walk (``store.pull_scan``) checks: the tag hash codes a consume-queue unit
    must carry (None: any unit passes) and the check of each record (None: every record)."""
    if message_filter is None:
        return None, None
    if isinstance(message_filter, TagFilter):
        return message_filter.codes, None
    return None, message_filter.is_matched_by_commit_log
