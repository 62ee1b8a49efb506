"""Push consumers' receipt handles on a fake clock: renewed ``ahead_ms`` before their deadline
while the client is connected, never after it disconnects, for at most ``RENEW_MAX_MS``;
settled to the latest renewal on ack. The renewer is driven through ``renew_due``, first
against a stand-in for the POP service, then against the real one on the same clock."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from pocketmq.broker.pop import InvalidReceiptHandle, PopService, ReceiptHandle
from pocketmq.clock import FakeClock
from pocketmq.errors import RequestError
from pocketmq.grpc.receipts import RENEW_MAX_MS, ReceiptRenewer
from pocketmq.protocol.codes import ResponseCode

sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
from pop_harness import GROUP, TOPIC, Broker, running, until_popped

CLIENT = "client@1"
INVISIBLE_MS = 60_000
AHEAD_MS = 10_000


class FakePop:
    """What the renewer asks of the POP service: a new handle, invisible from now."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.changed: list[str] = []  # the handles renewed, in order
        self.error: RequestError | None = None  # fails every renewal while set
        self.stale: set[str] = set()  # handles acked by another path

    async def change_invisible(
        self, group: str, topic: str, handle_text: str, invisible_ms: int
    ) -> str:
        if self.error is not None:
            raise self.error
        if handle_text in self.stale:
            raise InvalidReceiptHandle("the receipt handle is stale")
        self.changed.append(handle_text)
        old = ReceiptHandle.decode(handle_text)
        new = dataclasses.replace(old, pop_time=self.clock.now_ms(), invisible_ms=invisible_ms)
        return new.encode()


def handle_at(pop_time: int, invisible_ms: int = INVISIBLE_MS, offset: int = 7) -> str:
    return ReceiptHandle(offset, pop_time, invisible_ms, False, "broker-a", 0, offset).encode()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pop(clock: FakeClock) -> FakePop:
    return FakePop(clock)


@pytest.fixture
def renewer(pop: FakePop, clock: FakeClock) -> ReceiptRenewer:
    return ReceiptRenewer(cast(PopService, pop), INVISIBLE_MS, AHEAD_MS, clock=clock)


async def test_renewed_ahead_of_the_deadline_while_connected(
    renewer: ReceiptRenewer, pop: FakePop, clock: FakeClock
) -> None:
    given = handle_at(clock.now_ms(), invisible_ms=30_000)
    renewer.connected(CLIENT)
    renewer.track(CLIENT, GROUP, "m1", TOPIC, given)
    clock.advance(30_000 - AHEAD_MS - 1)
    await renewer.renew_due()
    assert pop.changed == []
    clock.advance(1)
    await renewer.renew_due()
    assert pop.changed == [given]
    renewed_at = clock.now_ms()
    clock.advance(INVISIBLE_MS - AHEAD_MS - 1)
    await renewer.renew_due()
    assert len(pop.changed) == 1
    clock.advance(1)
    await renewer.renew_due()
    assert len(pop.changed) == 2 and pop.changed[1] != given

    latest = await renewer.settle(CLIENT, GROUP, "m1", given)
    assert ReceiptHandle.decode(latest).pop_time == clock.now_ms() != renewed_at
    clock.advance(INVISIBLE_MS)
    await renewer.renew_due()
    assert len(pop.changed) == 2  # settled: no longer renewed
    assert await renewer.settle(CLIENT, GROUP, "m1", given) == given


async def test_not_renewed_after_the_client_disconnects(
    renewer: ReceiptRenewer, pop: FakePop, clock: FakeClock
) -> None:
    renewer.connected(CLIENT)
    renewer.connected(CLIENT)  # two Telemetry streams
    given = handle_at(clock.now_ms())
    renewer.track(CLIENT, GROUP, "m1", TOPIC, given)
    renewer.disconnected(CLIENT)
    clock.advance(INVISIBLE_MS - AHEAD_MS)
    await renewer.renew_due()
    assert len(pop.changed) == 1  # one stream is still open
    renewer.disconnected(CLIENT)
    clock.advance(INVISIBLE_MS)
    await renewer.renew_due()
    assert len(pop.changed) == 1
    assert await renewer.settle(CLIENT, GROUP, "m1", given) == given

    renewer.track("client@2", GROUP, "m2", TOPIC, handle_at(clock.now_ms()))
    clock.advance(INVISIBLE_MS)
    await renewer.renew_due()  # never connected: dropped at its first due time
    assert len(pop.changed) == 1


async def test_renewing_stops_after_the_max_total(
    renewer: ReceiptRenewer, pop: FakePop, clock: FakeClock
) -> None:
    renewer.connected(CLIENT)
    given = handle_at(clock.now_ms())
    renewer.track(CLIENT, GROUP, "m1", TOPIC, given)
    period = INVISIBLE_MS - AHEAD_MS  # each renewal is due this long after the previous one
    elapsed = 0
    while elapsed <= RENEW_MAX_MS + period:
        clock.advance(period)
        elapsed += period
        await renewer.renew_due()
    assert len(pop.changed) == RENEW_MAX_MS // period
    # Past the maximum the handle is forgotten: the client's own handle is all there is.
    assert await renewer.settle(CLIENT, GROUP, "m1", given) == given


async def test_a_stale_handle_is_dropped_and_a_failed_renewal_retried(
    renewer: ReceiptRenewer, pop: FakePop, clock: FakeClock
) -> None:
    renewer.connected(CLIENT)
    busy, acked = handle_at(clock.now_ms(), offset=7), handle_at(clock.now_ms(), offset=8)
    renewer.track(CLIENT, GROUP, "busy", TOPIC, busy)
    renewer.track(CLIENT, GROUP, "acked", TOPIC, acked)
    clock.advance(INVISIBLE_MS - AHEAD_MS)
    pop.error = RequestError(ResponseCode.SYSTEM_ERROR, "revive log put failed")
    await renewer.renew_due()
    assert pop.changed == []
    pop.error = None
    pop.stale.add(acked)
    await renewer.renew_due()  # both kept after the failure; the stale one is dropped now
    assert pop.changed == [busy]
    clock.advance(INVISIBLE_MS)
    await renewer.renew_due()
    assert [ReceiptHandle.decode(h).queue_offset for h in pop.changed] == [7, 7]
    assert await renewer.settle(CLIENT, GROUP, "acked", acked) == acked


# --- against the real POP service, both on one fake clock


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running(Broker(tmp_path, clock=FakeClock())) as b:
        yield b


def renewer_of(b: Broker) -> ReceiptRenewer:
    assert b.clock is not None
    return ReceiptRenewer(b.pop, invisible_ms=600, ahead_ms=400, clock=b.clock)


async def test_renewed_while_connected_then_acked_with_the_first_handle(broker: Broker) -> None:
    renewer = renewer_of(broker)
    renewer.connected(CLIENT)
    await broker.send("long job")
    (p,) = await broker.receive(invisible_ms=600)
    renewer.track(CLIENT, GROUP, "long job", TOPIC, p.handle)
    for _ in range(20):  # 2 s, three times the invisible time, scanned every 100 ms
        await renewer.renew_due()
        await broker.advance(100)
        assert await broker.receive() == []
    handle = await renewer.settle(CLIENT, GROUP, "long job", p.handle)
    assert handle != p.handle
    await broker.pop.ack(GROUP, TOPIC, handle)
    await broker.advance(800)
    assert await broker.receive() == []  # acked for good, no longer renewed


async def test_not_renewed_once_disconnected(broker: Broker) -> None:
    renewer = renewer_of(broker)
    renewer.connected(CLIENT)
    await broker.send("orphan")
    (p,) = await broker.receive(invisible_ms=600)
    renewer.track(CLIENT, GROUP, "orphan", TOPIC, p.handle)
    renewer.disconnected(CLIENT)
    for _ in range(6):
        await renewer.renew_due()
        await broker.advance(100)
    again = await until_popped(broker, 1)
    assert again[0].attempt == 2
    # Nothing renewed it: the client's handle is simply expired.
    with pytest.raises(InvalidReceiptHandle):
        await broker.pop.ack(GROUP, TOPIC, await renewer.settle(CLIENT, GROUP, "orphan", p.handle))
