"""Drive the unmodified 5.x client (``rocketmq-python-client==5.1.2``, gRPC) as a consumer for
test_grpc_consume.py. Runs in its own process: the client's generated protobuf code and
pocketmq's register the same ``apache.rocketmq.v2`` names, so they cannot share one; and the
client writes its logs under $HOME.

Usage: grpc_consumer_script.py ENDPOINT

Reads one JSON command per line on stdin and answers each with one JSON line on stdout that
carries the command's ``seq``. A push consumer's listener also prints one line per call, with
``"event": "consume"`` and no ``seq``. Times are ``time.time()`` seconds.

Commands (``op``):
  producer  {topics, check?}                  start a Producer; with ``check`` (COMMIT or
                                              ROLLBACK) a transactional one whose checker
                                              answers that and prints ``"event": "check"``
  send      {messages: [{topic, body, tag?, keys?, props?, group?, transaction?}]} -> {ids,
                                              transaction_ids}; ``transaction`` sends a half
                                              and then COMMITs, ROLLBACKs or leaves it OPEN
  simple    {group, topic, expr, await_s, sql?} start a SimpleConsumer (``sql``: a SQL92
                                              filter expression, else a tag expression)
  receive   {max_num, invisible_s}            -> {sent_at, at, messages} or {error, code}
  ack       {msg_id, handle?}                 ack the last received copy of message ``msg_id``,
                                              with ``handle`` instead of its own if given
  change    {msg_id, invisible_s}             change_invisible_duration -> {old_handle, handle}
  push      {group, topic, expr, fail, work_s} start a PushConsumer; ``fail`` maps a body to how
                                              many calls fail (-1: every call)
  exit                                        shut every client down and exit

A message is printed as {id, topic, body, tag, keys, props, group, attempt, handle,
born_timestamp}. Errors are {error, type, code}: the client's status code name
(e.g. INVALID_RECEIPT_HANDLE) when the server refused.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
)
from rocketmq.grpc_protocol import Code, FilterType, TransactionResolution

_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def describe(msg: Message) -> dict[str, Any]:
    return {
        "id": msg.message_id,
        "topic": msg.topic,
        "body": msg.body.decode("utf-8", "replace") if msg.body else "",
        "tag": msg.tag,
        "keys": sorted(msg.keys),
        "props": dict(msg.properties),
        "group": msg.message_group,
        "attempt": msg.delivery_attempt,
        "handle": msg.receipt_handle,
        "born_timestamp": msg.born_timestamp,
        "corrupted": msg.corrupted,
    }


def error(exc: BaseException) -> dict[str, Any]:
    code = getattr(exc, "code", None)
    name = None
    if isinstance(code, int):
        try:
            name = Code.Name(code)
        except ValueError:
            name = str(code)
    return {"error": str(exc), "type": type(exc).__name__, "code": name}


class Listener(MessageListener):
    """Prints every call; fails the bodies named in ``fail`` as many times as asked."""

    def __init__(self, fail: dict[str, int], work_s: float) -> None:
        self.fail = dict(fail)
        self.work_s = work_s
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        start = time.time()
        body = message.body.decode("utf-8", "replace") if message.body else ""
        with self.lock:
            left = self.fail.get(body, 0)
            failing = left != 0
            if left > 0:
                self.fail[body] = left - 1
        if self.work_s:
            time.sleep(self.work_s)  # makes overlapping calls visible in the start/end times
        result = ConsumeResult.FAILURE if failing else ConsumeResult.SUCCESS
        emit({
            "event": "consume", "start": start, "end": time.time(), "result": result.name,
            "thread": threading.current_thread().name, "message": describe(message),
        })  # fmt: skip
        return result


class Checker(TransactionChecker):
    """Answers every check-back with one resolution and prints it."""

    def __init__(self, resolution: str) -> None:
        self.resolution = resolution

    def check(self, message: Message) -> int:
        emit({"event": "check", "at": time.time(), "message": describe(message)})
        return int(TransactionResolution.Value(self.resolution))


class Session:
    def __init__(self, endpoint: str) -> None:
        self.config = ClientConfiguration(endpoint, Credentials())
        self.producer: Producer | None = None
        self.simple: SimpleConsumer | None = None
        self.push: PushConsumer | None = None
        self.received: dict[str, Message] = {}  # message id -> the last copy received

    def op_producer(self, topics: list[str], check: str | None = None) -> dict[str, Any]:
        checker = None if check is None else Checker(check)
        self.producer = Producer(self.config, tuple(topics), checker=checker)
        self.producer.startup()
        return {}

    def op_send(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert self.producer is not None, "no producer"
        ids, transaction_ids = [], []
        for spec in messages:
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = spec["body"].encode()
            if spec.get("tag"):
                msg.tag = spec["tag"]
            for key in spec.get("keys", ()):
                msg.keys = key  # the setter adds one key per assignment
            for name, value in spec.get("props", {}).items():
                msg.add_property(name, value)
            if spec.get("group"):
                msg.message_group = spec["group"]
            end = spec.get("transaction")
            if end is None:
                receipt = self.producer.send(msg)
            else:
                transaction = self.producer.begin_transaction()
                receipt = self.producer.send(msg, transaction=transaction)
                if end == "COMMIT":
                    transaction.commit()
                elif end == "ROLLBACK":
                    transaction.rollback()
            ids.append(receipt.message_id)
            transaction_ids.append(receipt.transaction_id)
        return {"ids": ids, "transaction_ids": transaction_ids, "at": time.time()}

    def op_simple(
        self, group: str, topic: str, expr: str, await_s: int, sql: bool = False
    ) -> dict[str, Any]:
        kind = FilterType.SQL if sql else FilterType.TAG
        self.simple = SimpleConsumer(
            self.config, group, {topic: FilterExpression(expr, kind)}, await_duration=await_s
        )
        self.simple.startup()
        return {}

    def op_receive(self, max_num: int, invisible_s: int) -> dict[str, Any]:
        assert self.simple is not None, "no simple consumer"
        sent_at = time.time()
        try:
            messages = self.simple.receive(max_num, invisible_s)
        except Exception as exc:
            return {"sent_at": sent_at, "at": time.time(), **error(exc)}
        at = time.time()
        for msg in messages:
            self.received[msg.message_id] = msg
        return {"sent_at": sent_at, "at": at, "messages": [describe(m) for m in messages]}

    def op_ack(self, msg_id: str, handle: str | None = None) -> dict[str, Any]:
        assert self.simple is not None, "no simple consumer"
        msg = self.received[msg_id]
        own = msg.receipt_handle
        if handle is not None:
            msg.receipt_handle = handle  # the public setter; restored below
        try:
            self.simple.ack(msg)
        except Exception as exc:
            return error(exc)
        finally:
            msg.receipt_handle = own
        return {"ok": True}

    def op_change(self, msg_id: str, invisible_s: int) -> dict[str, Any]:
        assert self.simple is not None, "no simple consumer"
        msg = self.received[msg_id]
        old = msg.receipt_handle
        sent_at = time.time()
        try:
            self.simple.change_invisible_duration(msg, invisible_s)
        except Exception as exc:
            msg.receipt_handle = old  # the client overwrites it even when refused
            return {"sent_at": sent_at, "old_handle": old, **error(exc)}
        return {"sent_at": sent_at, "at": time.time(), "old_handle": old,
                "handle": msg.receipt_handle}  # fmt: skip

    def op_push(
        self, group: str, topic: str, expr: str, fail: dict[str, int], work_s: float = 0.0
    ) -> dict[str, Any]:
        self.push = PushConsumer(
            self.config, group, Listener(fail, work_s), {topic: FilterExpression(expr)}
        )
        self.push.startup()  # waits for the server's settings reply
        return {"fifo": self.push.fifo}

    def close(self) -> None:
        for client in (self.push, self.simple, self.producer):
            if client is not None:
                try:
                    client.shutdown()
                except Exception as exc:  # report, and shut the others down anyway
                    emit({"event": "shutdown_error", **error(exc)})


def main() -> None:
    session = Session(sys.argv[1])
    ops: dict[str, Callable[..., dict[str, Any]]] = {
        name[3:]: getattr(session, name) for name in dir(session) if name.startswith("op_")
    }
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            op, seq = cmd.pop("op"), cmd.pop("seq")
            if op == "exit":
                break
            try:
                reply = ops[op](**cmd)
            except Exception as exc:
                reply = error(exc)
            emit({"seq": seq, "op": op, **reply})
    finally:
        session.close()
        emit({"event": "exited"})


if __name__ == "__main__":
    main()
