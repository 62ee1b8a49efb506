"""A producer that dies with a transaction open; run as a subprocess by test_transaction_client.py.

python tx_producer_script.py NAMESRV TOPIC GROUP BODY

Sends BODY as a half with a BlockingTransactionProducer whose local transaction never ends,
prints one JSON line ``{"open": transaction id}`` once the half is stored, and blocks until it
is killed. Checks that reach it are answered UNKNOW (it cannot know), and reported on stdout as
``{"checked": transaction id}``.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from pocketmq.client import (
    BlockingTransactionProducer,
    LocalTransactionState,
    Message,
    MessageExt,
    message,
)


def say(**fields: str | None) -> None:
    print(json.dumps(fields), flush=True)


class NeverEnds:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        say(open=msg.uniq_key)
        threading.Event().wait()  # the process is killed in here
        raise AssertionError("unreachable")

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        say(checked=msg.uniq_key)
        return LocalTransactionState.UNKNOW


def main(namesrv: str, topic: str, group: str, body: str) -> None:
    producer = BlockingTransactionProducer(group, namesrv, listener=NeverEnds())
    producer.start()
    producer.send_message_in_transaction(message(topic, body))


if __name__ == "__main__":
    main(*sys.argv[1:5])
