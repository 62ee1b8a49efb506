"""A user's program, outside pytest: ``async with pocketmq.testing.server() as s:`` and our
client. Prints one JSON object: the bodies consumed, the server's PID and directory."""

import asyncio
import json

import pocketmq.testing
from pocketmq.client import LitePullConsumer, Producer, message


async def main() -> None:
    async with pocketmq.testing.server() as s:
        async with Producer("shop", s.namesrv_addr) as producer:
            await producer.send(message("orders", b"order-1"))
        consumer = LitePullConsumer("billing", s.namesrv_addr)
        consumer.subscribe("orders")
        async with consumer:
            received = await consumer.poll(timeout_s=10)
        pid, workdir = s.pid, s.workdir
    print(json.dumps({"bodies": [m.body.decode() for m in received], "pid": pid,
                      "workdir": str(workdir)}))  # fmt: skip


asyncio.run(main())
