"""The HA service and client over real sockets on 127.0.0.1, time on a fake clock: what the
master sends a new slave, heartbeats, silent connections, SYNC_MASTER waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from store_helpers import msg, open_store, read_queue, segment_paths, small_config

from pocketmq.clock import FakeClock
from pocketmq.protocol.ha import FRAME_HEADER, encode_frame_header, encode_report
from pocketmq.store.config import BrokerRole, FlushDiskType
from pocketmq.store.ha import HAClient
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import PutStatus
from waiting import wait_until

HEARTBEAT_MS = 5_000
SILENT_MS = 20_000

Opener = Callable[..., MessageStore]


@pytest.fixture
async def stores(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Opener]:
    """stores(name, **config) -> an open store under tmp_path/name; its HA service is stopped
    and the store closed at teardown."""
    opened: list[MessageStore] = []

    def opener(name: str, **changes: Any) -> MessageStore:
        store = open_store(small_config(tmp_path / name, **changes), clock)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        await store.ha_service.stop()
        store.close()


async def fill(store: MessageStore, count: int, size: int = 300) -> None:
    for i in range(count):
        result = await store.put_message(msg(f"T{i % 2}", bytes([i % 256]) * size))
        assert result.status is not PutStatus.SERVICE_NOT_AVAILABLE, result


async def fake_slave(port: int, report: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_report(report))
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    phy, size = FRAME_HEADER.unpack(await reader.readexactly(FRAME_HEADER.size))
    return phy, await reader.readexactly(size)


async def test_a_slave_follows_its_master_byte_for_byte(
    stores: Opener, clock: FakeClock, tmp_path: Path
) -> None:
    master = stores("master")
    slave = stores("slave", broker_role=BrokerRole.SLAVE)
    port = await master.ha_service.start("127.0.0.1", 0)
    client = HAClient(slave, clock, f"127.0.0.1:{port}")
    client.start()
    try:
        await wait_until(lambda: len(master.ha_service.connections) == 1, 5, "the slave")
        await fill(master, 50)
        await wait_until(
            lambda: slave.max_phy_offset() == master.max_phy_offset(), 10, "the slave's catch-up"
        )
        for topic in ("T0", "T1"):
            assert read_queue(slave, topic, 0) == read_queue(master, topic, 0)
        await wait_until(
            lambda: master.ha_service.push_to_slave_max_offset == master.max_phy_offset(),
            5, "the slave's ack",
        )  # fmt: skip
        (conn,) = master.ha_service.state().connections
        assert conn.ack_offset == master.max_phy_offset() and conn.lag_bytes == 0
        state = client.state()
        assert state.connected and state.max_offset == master.max_phy_offset()
        assert state.last_frame_ms == clock.now_ms()
    finally:
        await client.stop()
    for m, s in zip(
        segment_paths(tmp_path / "master"), segment_paths(tmp_path / "slave"), strict=True
    ):
        assert m.name == s.name and m.read_bytes() == s.read_bytes()


async def test_a_new_slave_gets_the_last_segment_then_heartbeats(
    stores: Opener, clock: FakeClock
) -> None:
    master = stores("master")
    await fill(master, 40)
    last = master.commitlog.mfq.last()
    assert last is not None and last.file_from_offset > 0
    port = await master.ha_service.start("127.0.0.1", 0)
    reader, writer = await fake_slave(port, 0)
    try:
        phy, body = await read_frame(reader)
        assert phy == last.file_from_offset
        assert body == last.read(0, last.wrote_position)
        clock.advance(HEARTBEAT_MS)
        await master.ha_service.due_work()
        assert await read_frame(reader) == (master.max_phy_offset(), b"")
    finally:
        writer.close()


async def test_frames_are_at_most_the_batch_size_and_follow_appends(
    stores: Opener, clock: FakeClock
) -> None:
    master = stores("master", ha_transfer_batch_size=100)
    await fill(master, 1)
    port = await master.ha_service.start("127.0.0.1", 0)
    reader, writer = await fake_slave(port, 0)
    try:
        got = b""
        while len(got) < master.max_phy_offset():
            phy, body = await read_frame(reader)
            assert phy == len(got) and 0 < len(body) <= 100
            got += body
        await fill(master, 1)  # the writer wakes on the append
        while len(got) < master.max_phy_offset():
            got += (await read_frame(reader))[1]
        assert got == master.commitlog.read(0, master.max_phy_offset())
    finally:
        writer.close()


async def test_a_silent_slave_is_closed_and_a_report_past_the_end_too(
    stores: Opener, clock: FakeClock
) -> None:
    master = stores("master")
    await fill(master, 2)
    port = await master.ha_service.start("127.0.0.1", 0)
    reader, writer = await fake_slave(port, master.max_phy_offset())
    await wait_until(lambda: master.ha_service.connections, 5, "the connection")
    clock.advance(SILENT_MS + 1)
    await master.ha_service.due_work()
    assert not master.ha_service.connections
    assert await reader.read() == b""  # closed by the master
    writer.close()

    reader, writer = await fake_slave(port, 0)
    await read_frame(reader)
    writer.write(encode_report(master.max_phy_offset() + 1))
    while await reader.read(1 << 16):
        pass
    assert not master.ha_service.connections
    writer.close()


async def test_sync_master_answers_by_its_slave(stores: Opener, clock: FakeClock) -> None:
    master = stores("master", broker_role=BrokerRole.SYNC_MASTER)
    slave = stores("slave", broker_role=BrokerRole.SLAVE)
    # No slave: the record is stored, the answer says it is not replicated.
    result = await master.put_message(msg("T", b"alone"))
    assert result.status is PutStatus.SLAVE_NOT_AVAILABLE and result.phy_offset == 0
    assert master.get_max_offset_in_queue("T", 0) == 1
    port = await master.ha_service.start("127.0.0.1", 0)
    client = HAClient(slave, clock, f"127.0.0.1:{port}")
    client.start()
    try:
        await wait_until(lambda: master.ha_service.connections, 5, "the slave")
        for i in range(5):
            result = await master.put_message(msg("T", b"%d" % i))
            assert result.status is PutStatus.PUT_OK
            assert slave.max_phy_offset() >= result.next_offset
        # WAIT_STORE_MSG_OK=false does not wait.
        quick = msg("T", b"no wait", properties={"WAIT": "false"})
        assert (await master.put_message(quick)).status is PutStatus.PUT_OK
    finally:
        await client.stop()


async def test_sync_master_times_out_when_the_slave_stops_acking(
    stores: Opener, clock: FakeClock
) -> None:
    master = stores(
        "master", broker_role=BrokerRole.SYNC_MASTER, flush_disk_type=FlushDiskType.SYNC_FLUSH
    )
    port = await master.ha_service.start("127.0.0.1", 0)
    reader, writer = await fake_slave(port, 0)  # connected, never acks again
    try:
        await wait_until(lambda: master.ha_service.connections, 5, "the slave")
        put = asyncio.create_task(master.put_message(msg("T", b"stuck")))
        await wait_until(lambda: master.max_phy_offset() > 0, 5, "the append")
        await read_frame(reader)  # it was sent; no ack comes back
        assert not put.done()
        clock.advance(master.config.sync_flush_timeout)
        await master.ha_service.due_work()
        result = await put
        assert result.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        # Past haMaxGapNotInSync behind, the slave no longer counts.
        assert master.ha_service.is_slave_ok(master.max_phy_offset())
        assert not master.ha_service.is_slave_ok(master.config.ha_max_gap_not_in_sync)
    finally:
        writer.close()


async def test_the_client_drops_a_master_whose_frame_does_not_continue_its_log(
    stores: Opener, clock: FakeClock
) -> None:
    slave = stores("slave", broker_role=BrokerRole.SLAVE)
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await accepted.put((r, w))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HAClient(slave, clock, f"127.0.0.1:{port}")
    client.start()
    try:
        reader, writer = await accepted.get()
        assert await reader.readexactly(8) == encode_report(0)
        # A heartbeat at 0 continues an empty log; then a frame at 64 does not.
        writer.write(encode_frame_header(0, 0) + encode_frame_header(0, 0))
        await wait_until(lambda: client.last_frame_ms > 0, 5, "the heartbeat")
        writer.write(encode_frame_header(64, 4) + b"abcd")
        # An empty log takes any first offset only at a segment start: refused, dropped.
        while await reader.read(1 << 16):
            pass
        writer.close()
        assert slave.max_phy_offset() == 0
        # It reconnects (after a short backoff) and reports where it is again.
        reader, writer = await accepted.get()
        assert await reader.readexactly(8) == encode_report(0)
        writer.close()
    finally:
        await client.stop()
        server.close()
        await server.wait_closed()
