"""The client's CPU per ``Producer.send`` with the connection faked in this process.

A real ``RemotingChannel`` gets a transport that writes nowhere: each request's answer (a
SEND_MESSAGE_V2 response as the broker writes it, encoded before timing starts) is handed to
``data_received`` on the loop's next iteration, the answers of one iteration in one chunk, as a
socket read would. So the figure is the Python work of a send (message, producer, instance,
channel, frame encode and decode, asyncio) without syscalls, the server or another process
cooling the caches: the part of client_bench.py's "client µs/msg" that our code decides, and
steady on a shared machine, since it is process CPU time. Best of ``--rounds`` per concurrency.

    python bench/send_cpu_bench.py [--count 20000] [--concurrency 1,32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import uvloop

from fake_channel import TOPIC, NullTransport, faked_producer
from pocketmq.client import message
from pocketmq.protocol.codes import LanguageCode, ResponseCode
from pocketmq.protocol.native import DESCRIPTION
from pocketmq.protocol.remoting import FLAG_RESPONSE, RemotingCommand
from pocketmq.remoting.channel import RemotingChannel


def answer(opaque: int) -> bytes:
    return RemotingCommand(
        code=ResponseCode.SUCCESS, language=LanguageCode.JAVA, opaque=opaque, flag=FLAG_RESPONSE,
        ext_fields={"MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
                    "msgId": f"7F00000100002A9F{opaque:016X}", "queueId": "0",
                    "queueOffset": str(opaque)},
    ).encode()  # fmt: skip


class AnsweringTransport(NullTransport):
    """Takes requests and answers them in order on the next loop iteration."""

    def __init__(self, channel: RemotingChannel, answers: list[bytes]) -> None:
        self.loop = asyncio.get_running_loop()
        self.channel = channel
        self.answers = answers
        self.next = 1  # the channel's first opaque
        self.due: list[bytes] = []

    def write(self, data: bytes) -> None:
        # One answer per frame: a channel writes the frames of an iteration in one call.
        if not self.due:
            self.loop.call_soon(self._answer)
        pos = 0
        while pos < len(data):
            pos += 4 + int.from_bytes(data[pos : pos + 4], "big")
            self.due.append(self.answers[self.next])
            self.next += 1

    def _answer(self) -> None:
        chunk, self.due = b"".join(self.due), []
        self.channel.data_received(chunk)


async def bench(count: int, concurrency: list[int], rounds: int) -> None:
    warmup = 500
    answers = [b""] + [answer(i) for i in range(1, warmup + count * rounds * len(concurrency) + 1)]
    channel = RemotingChannel()
    channel.connection_made(AnsweringTransport(channel, answers))  # type: ignore[arg-type]
    producer = faked_producer(channel)
    body = b"x" * 1024
    for _ in range(warmup):
        await producer.send(message(TOPIC, body, tags="bench"))
    best = {c: float("inf") for c in concurrency}
    for _ in range(rounds):
        for c in concurrency:
            remaining = count

            async def sender() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    await producer.send(message(TOPIC, body, tags="bench"))

            cpu0 = time.process_time()
            await asyncio.gather(*(sender() for _ in range(c)))
            best[c] = min(best[c], (time.process_time() - cpu0) * 1e6 / count)
    print(f"client CPU per Producer.send, connection faked in-process; {DESCRIPTION}")
    for c in concurrency:
        print(f"  send c={c:<3} {best[c]:6.1f} µs  (best of {rounds} rounds of {count})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument(
        "--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 32]
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(bench(args.count, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
