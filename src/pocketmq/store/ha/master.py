"""The master side of replication (RocketMQ 4.x's HAService, HAConnection and
GroupTransferService): an asyncio server on the HA port, one reader and one writer per slave.

- The reader takes the slave's reports (protocol/ha.py). The first says where the slave's log
  ends: 0 (an empty slave) starts it at the first byte of this master's LAST CommitLog segment,
  anything else at that offset. Every report is the slave's ack offset; a report past this
  master's end closes the connection.
- The writer pushes the CommitLog from there in frames of at most haTransferBatchSize bytes,
  never past a segment's end (blank records included), and a heartbeat (an empty frame)
  when it has sent nothing for haSendHeartbeatInterval. It sleeps until the store appends:
  ``notify_appended`` wakes it, nothing polls.
- SYNC_MASTER puts wait here (``wait_for_slave``) until some slave's ack covers them, up to
  their deadline (then False: FLUSH_SLAVE_TIMEOUT); ``is_slave_ok`` is RocketMQ's check
  that decides SLAVE_NOT_AVAILABLE before a put waits at all. Under failover an
  ``ack_policy`` replaces "some slave": it names the offset that every slave a put needs
  (the sync-state set's) has acknowledged (broker/failover/sync_state.py).
- Each connection keeps when its slave last held everything this master had (Kafka's
  lastCaughtUpTime: the time of the last send that reached the log's end, once the slave acks
  it), from which admin reads a lag in seconds and failover decides who is in sync.

Deadlines, heartbeats and the closing of connections silent for haHousekeepingInterval are
read from the injected clock by one due-work loop (``tasks.run_when_due``), so a test drives
them with a fake clock by calling ``due_work``. Runs on the event loop; reads the CommitLog's
mapped segments, which the store appends to on the same loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import logging
import socket
from collections.abc import Callable

from pocketmq.clock import Clock
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol.ha import ReportReader, encode_frame_header
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.ha.state import MasterReplicationState, SlaveConnectionState
from pocketmq.tasks import cancel_and_wait, run_when_due

log = logging.getLogger(__name__)

# Bytes a writer sends before it lets the event loop serve others (a slave catching up
# reads faster than a loop should be held).
_SEND_ROUND_BYTES = 1 << 20
_READ_SIZE = 64 * 1024
# Sends that reached the log's end, remembered per connection to date the slave's acks
# (caught_up_ms); one per this many ms at most, and at most _MAX_MARKS of them.
_MARK_EVERY_MS = 5
_MAX_MARKS = 4096


class HAService:
    """Replication's master side for one store (no I/O until ``start``)."""

    def __init__(self, commitlog: CommitLog, config: StoreConfig, clock: Clock) -> None:
        self.commitlog = commitlog
        self.config = config
        self.clock = clock
        self.connections: list[HAConnection] = []
        # The highest offset a slave has acknowledged (RocketMQ's push2SlaveMaxOffset).
        self.push_to_slave_max_offset = 0
        self.ha_address = ""
        self._server: asyncio.Server | None = None
        self._waiters: list[tuple[int, int, float, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        # Under failover: the offset every slave a put must wait for has acknowledged (-1:
        # no slave is in sync); None keeps RocketMQ 4.x's rule (any one slave).
        self.ack_policy: Callable[[], int] | None = None
        # Called after an ack and when a connection comes or goes (failover watches them).
        self.on_change: Callable[[], None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); returns the bound port.

        Raises:
            OSError: the port cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._accept, host, port, reuse_address=True, limit=_READ_SIZE
        )
        bound = self._server.sockets[0].getsockname()
        self.ha_address = f"{bound[0]}:{bound[1]}"
        self._loop_task = asyncio.create_task(run_when_due(self.due_work, self._wake))
        log.info("HA service listening on %s", self.ha_address)
        return int(bound[1])

    async def stop(self) -> None:
        """Close the server and every connection; puts still waiting get False."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        await cancel_and_wait([self._loop_task])
        self._loop_task = None
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        waiters, self._waiters = self._waiters, []
        for *_, fut in waiters:
            if not fut.done():
                fut.set_result(False)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = HAConnection(self, reader, writer)
        log.info("HA connection from slave %s", conn.slave_address)
        self.connections.append(conn)
        self._wake.set()
        self._changed()
        await conn.run()

    # ------------------------------------------------------------------ the store's side

    def covered_offset(self) -> int:
        """The offset up to which a waiting put counts as replicated."""
        if self.ack_policy is not None:
            return self.ack_policy()
        return self.push_to_slave_max_offset

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and within haMaxGapNotInSync of ``master_put_where`` (under
        failover: the sync-state set holds a slave)."""
        if self.ack_policy is not None:
            return self.ack_policy() >= 0
        return bool(self.connections) and (
            master_put_where - self.push_to_slave_max_offset < self.config.ha_max_gap_not_in_sync
        )

    def wait_for_slave(self, next_offset: int, timeout_ms: int) -> asyncio.Future[bool]:
        """A future that becomes True once a slave has acknowledged ``next_offset``, or False
        after ``timeout_ms`` (or when the service stops)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self.covered_offset() >= next_offset:
            fut.set_result(True)
            return fut
        deadline = self.clock.monotonic() + timeout_ms / 1000
        heapq.heappush(self._waiters, (next_offset, next(self._seq), deadline, fut))
        self._wake.set()
        return fut

    def notify_appended(self) -> None:
        """The CommitLog grew: wake the writers."""
        for conn in self.connections:
            conn.wake()

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: release the puts it covers."""
        self.push_to_slave_max_offset = max(self.push_to_slave_max_offset, offset)
        self.release()
        self._changed()

    def release(self) -> None:
        """Answer True to the waiting puts the acks now cover (also after the rule changes)."""
        covered = self.covered_offset()
        waiters = self._waiters
        while waiters and waiters[0][0] <= covered:
            fut = heapq.heappop(waiters)[3]
            if not fut.done():
                fut.set_result(True)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ timed duties

    async def due_work(self) -> int | None:
        """Expire waiting puts, close silent connections, send due heartbeats; returns ms
        until the next of these is due (None: nothing pending)."""
        now = self.clock.monotonic()
        now_ms = self.clock.now_ms()
        due: list[float] = []
        if self._waiters:
            late = [w for w in self._waiters if w[2] <= now]
            if late:
                log.warning("%d puts not acknowledged by a slave in time", len(late))
                self._waiters = [w for w in self._waiters if w[2] > now]
                heapq.heapify(self._waiters)
                for *_, fut in late:
                    if not fut.done():
                        fut.set_result(False)
            due += [(w[2] - now) * 1000 for w in self._waiters]
        silent_ms = self.config.ha_housekeeping_interval
        heartbeat_ms = self.config.ha_send_heartbeat_interval
        for conn in list(self.connections):
            idle = now_ms - conn.last_read_ms
            if idle > silent_ms:
                log.warning(
                    "HA connection of %s silent for %d ms: closed", conn.slave_address, idle
                )
                await conn.close()
                continue
            due.append(silent_ms - idle + 1)
            quiet = now_ms - conn.last_write_ms
            if quiet >= heartbeat_ms:
                conn.wake()
                quiet = 0
            due.append(heartbeat_ms - quiet)
        return max(1, int(min(due))) if due else None

    def remove(self, conn: HAConnection) -> None:
        with contextlib.suppress(ValueError):
            self.connections.remove(conn)
            self._changed()

    def state(self) -> MasterReplicationState:
        top = self.commitlog.max_offset()
        now_ms = self.clock.now_ms()
        return MasterReplicationState(
            ha_address=self.ha_address,
            max_offset=top,
            push_to_slave_max_offset=self.push_to_slave_max_offset,
            connections=tuple(
                SlaveConnectionState(
                    c.slave_address,
                    c.slave_ack_offset,
                    top - max(c.slave_ack_offset, 0),
                    c.lag_ms(now_ms) / 1000,
                )
                for c in self.connections
            ),
        )


class HAConnection:
    """One slave: a reader of its reports and a writer of frames."""

    def __init__(
        self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.slave_address = f"{peer[0]}:{peer[1]}" if peer else "?"
        # The slave's first report (where to start) and its latest; -1 until reported.
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        now = service.clock.now_ms()
        self.last_read_ms = now
        self.last_write_ms = now
        self._wake = asyncio.Event()
        self._requested = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._gap_logged = False
        # When the slave last held everything this master had (see the module docstring),
        # and the (end offset, send time) of recent sends that reached the log's end.
        self.caught_up_ms = now
        self._marks: collections.deque[tuple[int, int]] = collections.deque()

    def lag_ms(self, now_ms: int) -> int:
        """How long the slave has been missing some byte this master has (0: none)."""
        if self.slave_ack_offset >= self.service.commitlog.max_offset():
            return 0
        return max(0, now_ms - self.caught_up_ms)

    def _acked(self, offset: int) -> None:
        now = self.service.clock.now_ms()
        if offset >= self.service.commitlog.max_offset():
            self.caught_up_ms = now
            self._marks.clear()
            return
        marks = self._marks
        while marks and marks[0][0] <= offset:
            self.caught_up_ms = max(self.caught_up_ms, marks.popleft()[1])

    def _mark_sent(self, end_offset: int, now_ms: int) -> None:
        marks = self._marks
        if marks and now_ms - marks[-1][1] < _MARK_EVERY_MS:
            return
        if len(marks) >= _MAX_MARKS:
            marks.popleft()
        marks.append((end_offset, now_ms))

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        self._tasks = [
            asyncio.create_task(self._read_loop()),
            asyncio.create_task(self._write_loop()),
        ]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in self._tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.warning("HA connection of %s failed: %s", self.slave_address,
                                task.exception())  # fmt: skip
        finally:
            await self.close()

    async def close(self) -> None:
        self.service.remove(self)
        current = asyncio.current_task()
        await cancel_and_wait(
            [t for t in self._tasks if t is not current and not t.done()], ignore_errors=True
        )
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()

    # ------------------------------------------------------------------ reports

    async def _read_loop(self) -> None:
        reports = ReportReader()
        commitlog = self.service.commitlog
        while True:
            data = await self.reader.read(_READ_SIZE)
            if not data:
                log.info("HA connection of %s closed by the slave", self.slave_address)
                return
            self.last_read_ms = self.service.clock.now_ms()
            try:
                offset = reports.feed(data)
            except RemoteProtocolError as exc:
                log.warning("slave %s: %s", self.slave_address, exc)
                return
            if offset is None:
                continue
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("slave %s requests offset %d", self.slave_address, offset)
                self._requested.set()
            elif offset > commitlog.max_offset():
                log.warning(
                    "slave %s reports offset %d past this master's end %d: closed",
                    self.slave_address, offset, commitlog.max_offset(),
                )  # fmt: skip
                return
            self.slave_ack_offset = offset
            self._acked(offset)
            self.service.notify_transfer_some(offset)

    # ------------------------------------------------------------------ transfer

    def _start_offset(self) -> int:
        if self.slave_request_offset == 0:
            top = self.service.commitlog.max_offset()
            return top - top % self.service.config.mapped_file_size_commit_log
        return self.slave_request_offset

    async def _write_loop(self) -> None:
        await self._requested.wait()
        self.next_transfer_from = self._start_offset()
        log.info(
            "transfer to slave %s from %d (it asked for %d)",
            self.slave_address, self.next_transfer_from, self.slave_request_offset,
        )  # fmt: skip
        while True:
            self._wake.clear()
            more = self._send_round()
            await self.writer.drain()
            if more:
                await asyncio.sleep(0)
            else:
                await self._wake.wait()

    def _send_round(self) -> bool:
        """Send what the CommitLog holds past next_transfer_from, up to _SEND_ROUND_BYTES, or
        a heartbeat if nothing was sent for a heartbeat interval; True if more is waiting."""
        commitlog = self.service.commitlog
        batch = self.service.config.ha_transfer_batch_size
        clock = self.service.clock
        sent = 0
        while sent < _SEND_ROUND_BYTES and self.next_transfer_from < commitlog.max_offset():
            body = self._read_from(self.next_transfer_from, batch)
            if body is None:
                break
            self.writer.write(encode_frame_header(self.next_transfer_from, len(body)))
            self.writer.write(body)
            self.next_transfer_from += len(body)
            sent += len(body)
        now = clock.now_ms()
        if sent:
            self.last_write_ms = now
            if self.next_transfer_from >= commitlog.max_offset():
                self._mark_sent(self.next_transfer_from, now)
        elif now - self.last_write_ms >= self.service.config.ha_send_heartbeat_interval:
            self.writer.write(encode_frame_header(self.next_transfer_from, 0))
            self.last_write_ms = now
        return sent >= _SEND_ROUND_BYTES

    def _read_from(self, phy_offset: int, limit: int) -> bytes | None:
        """Up to ``limit`` bytes from ``phy_offset`` to the end of what its segment holds
        (RocketMQ's getCommitLogData), copied out of the mapping: a segment that retention
        unmaps must not be pinned by a view held in a transport's buffer."""
        mfq = self.service.commitlog.mfq
        mf = mfq.find(phy_offset)
        if mf is None:
            if not self._gap_logged:
                self._gap_logged = True
                log.error(
                    "slave %s needs offset %d, but this master's log holds %d..%d",
                    self.slave_address, phy_offset, mfq.min_offset(), mfq.max_offset(),
                )  # fmt: skip
            return None
        pos = phy_offset - mf.file_from_offset
        size = min(mf.wrote_position - pos, limit)
        if size <= 0:
            return None
        try:
            return mf.read(pos, size)
        except ValueError:  # deleted by retention meanwhile
            return None
