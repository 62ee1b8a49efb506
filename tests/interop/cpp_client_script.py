"""Drives the unmodified C++-based ``rocketmq==0.4.4`` client; run as a subprocess by the tests.

python cpp_client_script.py produce NAMESRV RUN_ID     -> sends, prints one JSON line
python cpp_client_script.py consume NAMESRV EXPECTED   -> consumes TagA || TagB until
                                                          EXPECTED arrive (or 30 s),
                                                          prints one JSON line
python cpp_client_script.py orderly_consume NAMESRV SECONDS
                                                       -> an orderly consumer of OrderJoinTopic
                                                          for SECONDS; prints what it got, when
python cpp_client_script.py retry NAMESRV RETRIES      -> sends a level-1 delayed message and
                                                          one the listener always fails;
                                                          prints the deliveries as JSON
python cpp_client_script.py load NAMESRV FIRST TOPIC   -> sync sends of "m-FIRST", "m-FIRST+1",
                                                          ... to TOPIC (each once, the client's
                                                          own retries) until stdin closes;
                                                          prints "ok N" or "fail N" per send
python cpp_client_script.py acl_produce NAMESRV TOPIC AK SK
                                                       -> one sync send with session
                                                          credentials; prints its status or
                                                          the client's error
python cpp_client_script.py acl_pull NAMESRV TOPIC GROUP AK SK
                                                       -> one pull of each queue from offset 0
                                                          with session credentials; prints the
                                                          bodies, statuses and errors
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage, SendStatus
from rocketmq.exceptions import ProducerSendSyncFailed, ffi_check
from rocketmq.ffi import _CMessageQueue, _CPullStatus, dll

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from waiting import wait_until_sync

TOPIC = "InteropTopic"


def wait_for_count(got: list[Any], lock: threading.Lock, count: int, timeout_s: float) -> None:
    """Until ``count`` messages arrived, or ``timeout_s`` passed: then the test is shown what
    did arrive."""

    def enough() -> bool:
        with lock:
            return len(got) >= count

    with contextlib.suppress(AssertionError):
        wait_until_sync(enough, timeout_s, f"{count} messages")


def produce(namesrv: str, run_id: str) -> None:
    producer = Producer("PG_INTEROP")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    sent = []
    try:
        for i in range(12):
            tag = ("TagA", "TagB", "TagC")[i % 3]
            msg = Message(TOPIC)
            msg.set_keys(f"{run_id}-k{i}")
            msg.set_tags(tag)
            msg.set_body(f"{run_id}-body-{i}")
            msg.set_property("userProp", f"v{i}")
            if i % 4 == 1:
                producer.send_oneway(msg)
                status = "ONEWAY"
            elif i % 4 == 2:
                result = producer.send_orderly(msg, i)  # the hashing selector picks the queue
                status = SendStatus(result.status).name
            else:
                result = producer.send_sync(msg)
                status = SendStatus(result.status).name
            sent.append({"body": f"{run_id}-body-{i}", "tag": tag, "status": status})
    finally:
        producer.shutdown()
    print(json.dumps({"sent": sent}), flush=True)


def orderly(namesrv: str, count: int) -> None:
    producer = Producer("PG_ORDER")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        for i in range(count):
            key = i % 4
            msg = Message("OrderTopic")
            msg.set_tags("T")
            msg.set_body(f"{key}:{i}")
            producer.send_orderly(msg, key)
    finally:
        producer.shutdown()
    got: list[str] = []
    lock = threading.Lock()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        with lock:
            got.append(msg.body.decode())

    consumer = PushConsumer("CG_ORDER", orderly=True)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe("OrderTopic", on_message, "*")
    consumer.start()
    try:
        wait_for_count(got, lock, count, 30)
    finally:
        consumer.shutdown()
    print(json.dumps({"got": got}), flush=True)


def consume(namesrv: str, expected: int) -> None:
    got: list[dict[str, str]] = []
    lock = threading.Lock()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        with lock:
            got.append(
                {
                    "body": msg.body.decode(),
                    "tag": msg.tags.decode(),
                    "prop": (msg.get_property("userProp") or b"").decode(),
                }
            )

    consumer = PushConsumer("CG_INTEROP")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(TOPIC, on_message, "TagA || TagB")
    consumer.start()
    try:
        wait_for_count(got, lock, expected, 30)
        # The behaviour under test: a little longer, to catch anything that should not arrive.
        time.sleep(1.0)
    finally:
        consumer.shutdown()
    print(json.dumps({"got": got}), flush=True)


def orderly_consume(namesrv: str, seconds: float) -> None:
    got: list[tuple[str, float]] = []
    lock = threading.Lock()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        with lock:
            got.append((msg.body.decode(), time.time()))

    consumer = PushConsumer("CG_ORDER_JOIN", orderly=True)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe("OrderJoinTopic", on_message, "*")
    consumer.start()
    try:
        time.sleep(seconds)  # the test's schedule: it produces while both consumers run
    finally:
        consumer.shutdown()
    print(json.dumps({"got": got}), flush=True)


def retry(namesrv: str, retries: int) -> None:
    producer = Producer("PG_CPP_RETRY")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        delayed = Message("RetryInterop")
        delayed.set_body("delayed")
        delayed.set_delay_time_level(1)
        sent_at = time.time()
        producer.send_sync(delayed)
        poison = Message("RetryInterop")
        poison.set_body("poison")
        producer.send_sync(poison)
    finally:
        producer.shutdown()
    got: list[dict[str, object]] = []
    lock = threading.Lock()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        body = msg.body.decode()
        with lock:
            got.append({"body": body, "reconsume": msg.reconsume_times, "at": time.time(),
                        "topic": msg.topic})  # fmt: skip
        if body == "poison":
            raise RuntimeError("this listener fails the poison message")

    consumer = PushConsumer("CG_CPP_RETRY")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe("RetryInterop", on_message, "*")
    consumer.start()
    try:
        wait_for_count(got, lock, retries + 2, 40)
        time.sleep(1.5)  # the behaviour under test: a further delivery would be a bug
    finally:
        consumer.shutdown()
    print(json.dumps({"sent_at": sent_at, "got": got}), flush=True)


def load(namesrv: str, first: int, topic: str) -> None:
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    producer = Producer("PG_CPP_LOAD")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    n = first
    try:
        while not stop.is_set():
            msg = Message(topic)
            msg.set_body(f"m-{n}")
            try:
                ok = producer.send_sync(msg).status == SendStatus.OK
            except ProducerSendSyncFailed:
                ok = False
            print(f"{'ok' if ok else 'fail'} {n}", flush=True)
            if not ok:
                time.sleep(0.05)  # backoff while no broker takes writes
            n += 1
    finally:
        producer.shutdown()


def acl_produce(namesrv: str, topic: str, access_key: str, secret_key: str) -> None:
    producer = Producer("PG_CPP_ACL")
    producer.set_namesrv_addr(namesrv)
    producer.set_session_credentials(access_key, secret_key, "ALIYUN")
    producer.start()
    msg = Message(topic)
    msg.set_body("from-cpp")
    try:
        result = producer.send_sync(msg)
        outcome = {"status": SendStatus(result.status).name}
    except ProducerSendSyncFailed as exc:
        outcome = {"error": str(exc)}
    finally:
        producer.shutdown()
    print(json.dumps(outcome), flush=True)


def acl_pull(namesrv: str, topic: str, group: str, access_key: str, secret_key: str) -> None:
    """Each queue pulled once, through the client's own C calls: its PullConsumer.pull()
    retries a refused pull for ever (it reads a refusal as a broker timeout)."""
    consumer = PullConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_session_credentials(access_key, secret_key, "ALIYUN")
    consumer.start()
    bodies: list[str] = []
    statuses: list[str] = []
    errors: list[str] = []
    queues = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    try:
        ffi_check(dll.FetchSubscriptionMessageQueues(
            consumer._handle, topic.encode(), ctypes.pointer(queues), ctypes.pointer(size)
        ))  # fmt: skip
        for i in range(size.value):
            result = dll.Pull(consumer._handle, ctypes.pointer(queues[i]), b"*", 0, 32)
            statuses.append(_CPullStatus(result.pullStatus).name)
            if result.pullStatus == _CPullStatus.FOUND:
                bodies += [RecvMessage(result.msgFoundList[j]).body.decode()
                           for j in range(result.size)]  # fmt: skip
            elif result.pullStatus == _CPullStatus.BROKER_TIMEOUT:
                errors.append((dll.GetLatestErrorMessage() or b"").decode())
            dll.ReleasePullResult(result)
        ffi_check(dll.ReleaseSubscriptionMessageQueue(queues))
    finally:
        consumer.shutdown()
    print(json.dumps({"bodies": bodies, "statuses": statuses, "errors": errors}), flush=True)


if __name__ == "__main__":
    role, namesrv, arg = sys.argv[1:4]
    if role == "acl_produce":
        acl_produce(namesrv, arg, *sys.argv[4:6])
    elif role == "acl_pull":
        acl_pull(namesrv, arg, *sys.argv[4:7])
    elif role == "load":
        load(namesrv, int(arg), sys.argv[4])
    elif role == "produce":
        produce(namesrv, arg)
    elif role == "orderly":
        orderly(namesrv, int(arg))
    elif role == "orderly_consume":
        orderly_consume(namesrv, float(arg))
    elif role == "retry":
        retry(namesrv, int(arg))
    else:
        consume(namesrv, int(arg))
