"""The slave side of replication (RocketMQ 4.x's HAClient): follow a master's HA port and
append what it sends at the same CommitLog offsets.

On connect the slave reports its max CommitLog offset (0 when empty: the master then starts at
its last segment); it reports again after applying what one read brought and, as a heartbeat,
when it has reported nothing for haSendHeartbeatInterval. A frame is applied only if its offset
is the slave's own max offset (or the slave is empty); otherwise the connection is dropped and
logged, as RocketMQ does, and the next connection starts from the slave's offset again. The
store dispatches the appended records to consume queues and the index as usual.

The master's address is ``haMasterAddress`` when set, else what the broker learns from the
NameServer (``update_master_address``); a changed address or a dropped connection reconnects
with a backoff. A master silent for haHousekeepingInterval (it heartbeats far more often) is
taken for gone. Each read is applied before the next is taken, so a catch-up holds the event
loop for one read (at most 256 KiB) at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pocketmq.clock import Clock
from pocketmq.errors import RemoteProtocolError, StoreError
from pocketmq.protocol.ha import FrameReader, encode_report
from pocketmq.store.ha.state import SlaveReplicationState
from pocketmq.tasks import cancel_and_wait

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

_READ_SIZE = 256 * 1024
_CONNECT_TIMEOUT_S = 3.0
# Reconnect delays: doubled after each failure up to the cap, RocketMQ's 5 s.
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 5.0


class _MasterGone(Exception):
    """The session with the master ended; the reason is logged where it is raised."""


class HAClient:
    """Follows one master at a time; ``start`` spawns the loop, ``stop`` ends it."""

    def __init__(self, store: MessageStore, clock: Clock, master_address: str = "") -> None:
        self.store = store
        self.clock = clock
        self.config = store.config
        self.master_address = master_address
        self.connected = False
        self.last_frame_ms = 0
        self.last_report_ms = 0
        self.reported_offset = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        # Told the local "ip:port" of each new connection to the master ("" once it closes):
        # under failover the master learns from it which broker a connection is.
        self.on_connected: Callable[[str], None] | None = None
        self.local_address = ""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        self._close()

    def update_master_address(self, address: str) -> None:
        """Follow ``address`` from now on (a new one drops the current connection)."""
        if address != self.master_address:
            log.info("HA master address: %s -> %s", self.master_address or "-", address or "-")
            self.master_address = address
            self._changed.set()

    def state(self) -> SlaveReplicationState:
        return SlaveReplicationState(
            master_address=self.master_address,
            connected=self.connected,
            max_offset=self.store.max_phy_offset(),
            last_frame_ms=self.last_frame_ms,
        )

    # ------------------------------------------------------------------ connection loop

    async def _run(self) -> None:
        backoff = _BACKOFF_FIRST_S
        while True:
            self._changed.clear()
            address = self.master_address
            if not address:
                await self._changed.wait()
                continue
            try:
                await self._session(address)
                backoff = _BACKOFF_FIRST_S
            except (OSError, TimeoutError, _MasterGone) as exc:
                if not isinstance(exc, _MasterGone):
                    log.warning("HA master %s: %s", address, exc)
            finally:
                self._close()
            if self._changed.is_set():
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._changed.wait()
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def _close(self) -> None:
        self.connected = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._tell("")

    def _tell(self, local_address: str) -> None:
        self.local_address = local_address
        if self.on_connected is not None:
            self.on_connected(local_address)

    async def _session(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        self._writer = writer
        self.connected = True
        local = writer.get_extra_info("sockname")
        self._tell(f"{local[0]}:{local[1]}" if local else "")
        log.info(
            "HA connected to master %s, reporting offset %d", address, self.store.max_phy_offset()
        )
        self.last_frame_ms = self.clock.now_ms()
        self._report(self.store.max_phy_offset())
        frames = FrameReader()
        reading = asyncio.ensure_future(reader.read(_READ_SIZE))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            while True:
                done, _ = await asyncio.wait(
                    (reading, changed),
                    timeout=self._next_due_ms() / 1000,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if changed in done:
                    log.info("HA master changed: leaving %s", address)
                    return
                if reading in done:
                    data = reading.result()
                    if not data:
                        log.warning("HA master %s closed the connection", address)
                        raise _MasterGone
                    self.apply(frames, data)
                    reading = asyncio.ensure_future(reader.read(_READ_SIZE))
                self.tick()
        finally:
            await cancel_and_wait([reading, changed], ignore_errors=True)

    # ------------------------------------------------------------------ frames and reports

    def apply(self, frames: FrameReader, data: bytes) -> None:
        """Append the frames completed by ``data`` and report the new max offset.

        Raises:
            _MasterGone: a frame does not continue this slave's log, or cannot be stored.
        """
        self.last_frame_ms = self.clock.now_ms()
        try:
            for frame in frames.feed(data):
                mine = self.store.max_phy_offset()
                if mine != 0 and frame.phy_offset != mine:
                    log.error(
                        "master pushed offset %d, but this slave's log ends at %d: reconnecting",
                        frame.phy_offset, mine,
                    )  # fmt: skip
                    raise _MasterGone
                if frame.body:
                    self.store.append_replica(frame.phy_offset, frame.body)
        except RemoteProtocolError as exc:
            log.error("HA master sent a bad frame: %s", exc)
            raise _MasterGone from exc
        except StoreError as exc:
            log.error("cannot store replicated bytes: %s", exc)
            raise _MasterGone from exc
        mine = self.store.max_phy_offset()
        if mine > self.reported_offset:
            self._report(mine)

    def tick(self) -> None:
        """Report as a heartbeat if due; drop a master silent for haHousekeepingInterval.

        Raises:
            _MasterGone: the master has been silent too long.
        """
        now = self.clock.now_ms()
        silent = now - self.last_frame_ms
        if silent > self.config.ha_housekeeping_interval:
            log.warning("HA master %s silent for %d ms: reconnecting", self.master_address, silent)
            raise _MasterGone
        if now - self.last_report_ms >= self.config.ha_send_heartbeat_interval:
            self._report(self.store.max_phy_offset())

    def _next_due_ms(self) -> float:
        now = self.clock.now_ms()
        heartbeat = self.last_report_ms + self.config.ha_send_heartbeat_interval - now
        silence = self.last_frame_ms + self.config.ha_housekeeping_interval + 1 - now
        return max(1.0, min(heartbeat, silence))

    def _report(self, offset: int) -> None:
        if self._writer is None:
            return
        self._writer.write(encode_report(offset))
        self.reported_offset = offset
        self.last_report_ms = self.clock.now_ms()
