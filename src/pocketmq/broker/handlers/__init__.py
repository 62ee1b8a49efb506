"""Remoting handlers of the broker, one module per request family: each parses its header
and body, calls the messaging service (or an admin table) and maps the result to a response,
as RocketMQ's processors do. No RocketMQ rule is decided here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.handlers.admin import AdminHandlers
from pocketmq.broker.handlers.admin_query import AdminQueryHandlers
from pocketmq.broker.handlers.broker_config import BrokerConfigHandlers
from pocketmq.broker.handlers.client_admin import ClientAdminHandlers
from pocketmq.broker.handlers.clients import ClientHandlers
from pocketmq.broker.handlers.offsets import OffsetHandlers
from pocketmq.broker.handlers.pull import PullHandlers
from pocketmq.broker.handlers.query import QueryHandlers
from pocketmq.broker.handlers.reply import ReplyHandlers
from pocketmq.broker.handlers.send import SendHandlers
from pocketmq.broker.handlers.stats import StatsHandlers
from pocketmq.broker.handlers.transaction import TransactionHandlers
from pocketmq.remoting import Dispatcher

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def register_all(broker: Broker, dispatcher: Dispatcher) -> None:
    """Every request code the broker serves."""
    for family in (SendHandlers, PullHandlers, OffsetHandlers, ClientHandlers, QueryHandlers,
                   AdminHandlers, TransactionHandlers, ReplyHandlers,
                   ClientAdminHandlers, AdminQueryHandlers, BrokerConfigHandlers,
                   StatsHandlers):  # fmt: skip
        handlers = family(broker)
        runs = handlers.run_handlers() if isinstance(handlers, SendHandlers) else {}
        for code, handler in handlers.handlers().items():
            dispatcher.register(code, handler, runs.get(code))
