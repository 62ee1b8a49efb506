"""SIGKILL ``pocketmq serve`` while producers' sends are in flight, over the network, again and
again on one store.

test_sigkill.py kills the store's own writer; this kills the whole broker under pocketmq's
client (16 concurrent single sends, no client retries, bodies of 10 B to 5 KiB). After each
kill the broker restarts on the same store and the test reads every queue from offset 0 with
a LitePullConsumer: each acknowledged send is there exactly once with its body, each queue
holds offsets 0..max-1 and nothing else, and no more sends are stored unacknowledged than were
in flight at the kill. A send after the last restart continues its queue.

As in test_sigkill.py, SIGKILL ends the process, not the machine, so acknowledged sends must
survive under ASYNC_FLUSH as under SYNC_FLUSH. Each test draws a fresh seed
(POCKETMQ_CRASH_SEED replays one) for when each kill comes and for the bodies' sizes.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import pytest
from crash_helpers import crash_seed

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from server_procs import ServerProcess

from pocketmq.admin import AdminClient
from pocketmq.admin.topic_stats import topic_status
from pocketmq.client import LitePullConsumer, MessageQueue, Producer, SendStatus, message
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.slow]

TOPIC = "SigkillServeTopic"
SENDERS = 16
ROUNDS = 5
SIZES = (10, 500, 1200, 5000)


def start(workdir: Path, flush: str) -> ServerProcess:
    conf = workdir / "broker.conf"
    conf.write_text(f"flushDiskType={flush}\n")
    return ServerProcess(
        "serve", workdir, "-c", str(conf), "--store", str(workdir / "store"),
        "--namesrv-port", "0", "--broker-port", "0", listen=False,
    )  # fmt: skip


async def sends_until_killed(
    server: ServerProcess, rng: random.Random, round_no: int, acked: dict[str, bytes]
) -> None:
    """Send from SENDERS tasks, each one send at a time, until the broker is SIGKILLed after a
    random number of acknowledgements; stops the server."""
    kill_after = len(acked) + rng.randrange(50, 5000)
    sizes = [rng.choice(SIZES) for _ in range(SENDERS)]
    producer = Producer("sigkill-pg", f"127.0.0.1:{server.ready['namesrv']}", retry_times=0)
    await producer.start()

    async def sender(worker: int) -> None:
        n = 0
        while True:
            key = f"r{round_no}-w{worker}-{n}"
            n += 1
            body = (key.encode() * (sizes[worker] // len(key) + 1))[: sizes[worker]]
            try:
                result = await producer.send(message(TOPIC, body, keys=key))
            except Exception:  # the broker is gone: this sender is done
                return
            if result.status is SendStatus.SEND_OK:
                acked[key] = body

    senders = [asyncio.create_task(sender(w)) for w in range(SENDERS)]
    try:
        await wait_until(lambda: len(acked) >= kill_after, 60, f"{kill_after} acknowledged sends")
        server.proc.kill()
        server.proc.wait()
        await asyncio.wait_for(asyncio.gather(*senders), 30)
    finally:
        for task in senders:
            task.cancel()
        server.stop()
        await producer.shutdown()


async def stored(server: ServerProcess) -> tuple[dict[str, bytes], dict[int, int]]:
    """Every message of TOPIC by key, checking that each queue holds 0..max-1 once; and each
    queue's max offset."""
    namesrv = f"127.0.0.1:{server.ready['namesrv']}"
    async with AdminClient(namesrv) as admin:
        stats = await topic_status(admin, TOPIC)
    queues = [MessageQueue(TOPIC, s.broker_name, s.queue_id) for s in stats]
    max_offsets = {s.queue_id: s.max_offset for s in stats}
    assert all(s.min_offset == 0 for s in stats), stats
    consumer = LitePullConsumer("sigkill-verify", namesrv, auto_commit=False)
    consumer.assign(queues)
    await consumer.start()
    by_key: dict[str, bytes] = {}
    offsets: dict[int, list[int]] = {queue_id: [] for queue_id in max_offsets}
    try:
        for queue in queues:
            await consumer.seek(queue, 0)

        total = sum(max_offsets.values())

        async def read_all() -> bool:
            while len(by_key) < total and (batch := await consumer.poll(0.5)):
                for msg in batch:
                    key = msg.properties["KEYS"]
                    assert key not in by_key, f"{key} is stored twice"
                    by_key[key] = msg.body
                    offsets[msg.queue_id].append(msg.queue_offset)
            return len(by_key) >= total

        await wait_until(read_all, 60, lambda: f"every message, read {len(by_key)}")
    finally:
        await consumer.shutdown()
    for queue_id, max_offset in max_offsets.items():
        assert sorted(offsets[queue_id]) == list(range(max_offset)), queue_id
    return by_key, max_offsets


async def check(
    server: ServerProcess, seed: int, acked: dict[str, bytes], in_flight: int
) -> dict[int, int]:
    """What ``stored`` finds, against what was acknowledged; each queue's max offset."""
    by_key, max_offsets = await stored(server)
    lost = [k for k in acked if k not in by_key]
    assert not lost, f"seed {seed}: {len(lost)} acknowledged sends lost, e.g. {lost[:5]}"
    wrong = [k for k in acked if by_key[k] != acked[k]]
    assert not wrong, f"seed {seed}: bodies changed, e.g. {wrong[:5]}"
    unacked = len(by_key) - len(acked)
    assert 0 <= unacked <= in_flight, f"seed {seed}: {unacked} stored unacknowledged"
    return max_offsets


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_acknowledged_sends_survive_repeated_sigkills(tmp_path: Path, flush: str) -> None:
    seed = crash_seed()
    rng = random.Random(seed)
    acked: dict[str, bytes] = {}
    in_flight = 0
    for round_no in range(ROUNDS):
        server = start(tmp_path, flush)
        try:
            if round_no:
                await check(server, seed, acked, in_flight)
        except BaseException:
            server.stop()
            raise
        await sends_until_killed(server, rng, round_no, acked)
        in_flight += SENDERS  # at most one send of each sender was in flight at the kill
    server = start(tmp_path, flush)
    try:
        max_offsets = await check(server, seed, acked, in_flight)
        async with Producer("sigkill-after", f"127.0.0.1:{server.ready['namesrv']}") as producer:
            result = await producer.send(message(TOPIC, b"after the kills"))
        assert result.status is SendStatus.SEND_OK, f"seed {seed}: {result}"
        assert result.queue_offset == max_offsets[result.message_queue.queue_id], f"seed {seed}"
    finally:
        assert server.stop() == 0, server.log_path.read_text()
