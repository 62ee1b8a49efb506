"""Transactional messages: an order is announced on topic ``orders`` only if saving it committed.

Each order is saved in a local SQLite database inside the local transaction of a half message:

- a valid order is inserted and committed: COMMIT_MESSAGE, consumers see it at once;
- an order the database refuses (a negative amount breaks a CHECK constraint) is rolled back:
  ROLLBACK_MESSAGE, no consumer ever sees it;
- every ``--lose-every``-th order is saved but its answer is lost, as if the producer died
  right after the database commit (the listener answers UNKNOW): the broker asks later
  (CHECK_TRANSACTION_STATE), and the check listener finds the order saved, so COMMIT_MESSAGE.

A push consumer prints what arrives; the example ends once every saved order has arrived
(exit 0), or after ``--wait`` seconds (exit 1). The checked orders come after the broker's
``transactionTimeOut`` (6 s) plus up to one ``transactionCheckInterval`` (30 s).

Start a broker first (``make run`` or ``pocketmq serve``), then:

    python examples/transactions/orders.py [--namesrv 127.0.0.1:9876] [--orders 12]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pocketmq.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    PushConsumer,
    TransactionProducer,
    message,
)

TOPIC = "orders"


class OrderBook:
    """The local database, and the listener of the transactional producer.

    Its methods are plain functions (SQLite blocks), so the producer runs them on threads; each
    opens its own connection."""

    def __init__(self, path: Path, lose_every: int) -> None:
        self.path = path
        self.lose_every = lose_every
        with self._db() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS orders ("
                " id TEXT PRIMARY KEY, amount INTEGER NOT NULL CHECK (amount > 0))"
            )

    @contextlib.contextmanager
    def _db(self) -> Any:
        with contextlib.closing(sqlite3.connect(self.path)) as db, db:  # commits or rolls back
            yield db

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        order = json.loads(msg.body)
        try:
            with self._db() as db:
                db.execute("INSERT INTO orders VALUES (?, ?)", (order["id"], order["amount"]))
        except sqlite3.IntegrityError as exc:
            print(f"  {order['id']}: refused by the database ({exc}): ROLLBACK")
            return LocalTransactionState.ROLLBACK_MESSAGE
        if arg % self.lose_every == 0:
            print(f"  {order['id']}: saved, answer lost: the broker will check")
            return LocalTransactionState.UNKNOW
        print(f"  {order['id']}: saved: COMMIT")
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        order_id = json.loads(msg.body)["id"]
        with self._db() as db:
            saved = db.execute("SELECT 1 FROM orders WHERE id = ?", (order_id,)).fetchone()
        state = LocalTransactionState.COMMIT_MESSAGE if saved else LocalTransactionState.UNKNOW
        print(f"  broker checks {order_id}: {state.value}")
        return state


async def run(namesrv: str, orders: int, lose_every: int, wait_s: float, db_path: Path) -> int:
    book = OrderBook(db_path, lose_every)
    run_id = time.strftime("%H%M%S")
    arrived: dict[str, float] = {}

    async def consume(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            order = json.loads(m.body)
            if order["id"].startswith(run_id):
                arrived[order["id"]] = time.monotonic()
                print(f"consumer got {order['id']} (amount {order['amount']})")
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "order-audit",
        namesrv,
        listener=consume,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC)
    saved: set[str] = set()
    # The producer stays up after its sends: the broker's checks come to it.
    async with TransactionProducer("order-service", namesrv, listener=book) as producer:
        for i in range(1, orders + 1):
            amount = -5 if i % 5 == 0 else 10 * i  # every fifth order is invalid
            order_id = f"{run_id}-{i}"
            msg = message(TOPIC, json.dumps({"id": order_id, "amount": amount}), keys=order_id)
            result = await producer.send_message_in_transaction(msg, arg=i)
            if result.local_transaction_state is not LocalTransactionState.ROLLBACK_MESSAGE:
                saved.add(order_id)
        async with consumer:  # now that the topic exists, its queues are found at once
            start = time.monotonic()
            while saved - set(arrived) and time.monotonic() - start < wait_s:
                await asyncio.sleep(0.2)
    missing, extra = saved - set(arrived), set(arrived) - saved
    print(f"{len(arrived)} orders announced, {len(saved)} saved; missing {sorted(missing)}")
    return 0 if not missing and not extra else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--orders", type=int, default=12)
    parser.add_argument("--lose-every", type=int, default=4)
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for checks")
    parser.add_argument("--db", type=Path, help="SQLite file (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "orders.db"
        sys.exit(asyncio.run(run(args.namesrv, args.orders, args.lose_every, args.wait, db)))


if __name__ == "__main__":
    main()
