"""Push consumers' receipt handles: renewed while the client is connected, settled to the
latest renewal on ack, left to expire once it disconnects."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from pocketmq.broker.pop import InvalidReceiptHandle
from pocketmq.grpc.receipts import ReceiptRenewer

sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
from pop_harness import GROUP, TOPIC, Broker, broker, until_popped

__all__ = ["broker"]  # the fixture

CLIENT = "client@1"


async def test_renewed_while_connected_then_acked_with_the_first_handle(broker: Broker) -> None:
    renewer = ReceiptRenewer(broker.pop, invisible_ms=600, ahead_ms=400)
    renewer.start()
    try:
        renewer.connected(CLIENT)
        await broker.send("long job")
        (p,) = await broker.receive(invisible_ms=600)
        renewer.track(CLIENT, GROUP, "long job", TOPIC, p.handle)
        started = time.monotonic()
        while time.monotonic() - started < 2.0:  # three times the invisible time
            assert await broker.receive(poll_ms=200) == []
        handle = await renewer.settle(CLIENT, GROUP, "long job", p.handle)
        assert handle != p.handle
        await broker.pop.ack(GROUP, TOPIC, handle)
        await asyncio.sleep(0.8)
        assert await broker.receive() == []  # acked for good, no longer renewed
    finally:
        await renewer.stop()


async def test_not_renewed_once_disconnected(broker: Broker) -> None:
    renewer = ReceiptRenewer(broker.pop, invisible_ms=600, ahead_ms=400)
    renewer.start()
    try:
        renewer.connected(CLIENT)
        await broker.send("orphan")
        (p,) = await broker.receive(invisible_ms=600)
        renewer.track(CLIENT, GROUP, "orphan", TOPIC, p.handle)
        renewer.disconnected(CLIENT)
        again = await until_popped(broker, 1)
        assert again[0].attempt == 2
        # Nothing renewed it: the client's handle is simply expired.
        with pytest.raises(InvalidReceiptHandle):
            await broker.pop.ack(
                GROUP, TOPIC, await renewer.settle(CLIENT, GROUP, "orphan", p.handle)
            )
    finally:
        await renewer.stop()
