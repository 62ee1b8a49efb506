"""Message filters beyond tags: RocketMQ's SQL92 selector (``sql92``) and the Java value
semantics it evaluates with (``java``). No I/O here; the store applies these filters and the
broker builds them from subscriptions."""

from pocketmq.filter.java import EvaluationError
from pocketmq.filter.sql92 import Sql92Expression, SqlFilterError, compile_sql92

__all__ = ["EvaluationError", "Sql92Expression", "SqlFilterError", "compile_sql92"]
