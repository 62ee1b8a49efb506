"""The master's side of the sync-state set: which slaves a put waits for, and when the set in
ZooKeeper shrinks or grows (RocketMQ 5's ReplicasManager / AutoSwitchHAService duty, on the
coordinator of coordinator.py). Runs on the event loop while the broker is master; reads the
HA service's connections, writes the set through the coordinator. No replication here.

Who a put waits for. ``required`` is the set's slaves as ZooKeeper last confirmed them
(``confirmed``) plus those being added (``adding``); a SYNC_MASTER put is acknowledged only
once every required slave has acknowledged its bytes (``covered``, the HA service's
``ack_policy``), and with no required slave it is not acknowledged at all (SLAVE_NOT_AVAILABLE
before it waits, FLUSH_SLAVE_TIMEOUT if the last one leaves while it waits).

Why no acknowledged byte is lost (the premise of rule.py). At every moment the set in
ZooKeeper is a subset of ``required``: a slave becomes required BEFORE the write that adds it
is sent, and stops being required only AFTER the write that removes it has succeeded (a write
that failed or timed out leaves it required, and is tried again). A slave is added only when
its ack offset is at least ``store.acked_through``, the end of every put acknowledged so far
(initialised to the log's end when this broker became master: every byte acknowledged in an
earlier epoch lies below it, rule.py's election rule 4). So every acknowledged byte is on
every slave the stored set names, as on the master, and an election (rule.py) only picks a
broker that holds them all. A slave that disconnects, or has lacked some byte for longer than
syncFlushTimeout, is removed; puts waiting on it get FLUSH_SLAVE_TIMEOUT unless the removal
lands first and the other required slaves cover them. The master also stops acknowledging the
moment its lease is not confirmed (``MessageStore.may_write``).

The master learns which broker an HA connection is from the live nodes in ZooKeeper: each
slave publishes the local address of its HA connection there (``set_ha_client_addr``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from pocketmq.broker.failover.model import FailoverError
from pocketmq.tasks import cancel_and_wait

if TYPE_CHECKING:
    from pocketmq.broker.failover.coordinator import FailoverCoordinator
    from pocketmq.store.ha.master import HAConnection, HAService
    from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

# How often the set is looked at without an event (acks and connections wake it sooner), and
# how often unknown HA connections may cost a read of the live nodes.
_TICK_S = 0.2
_IDENTIFY_EVERY_MS = 200


class SyncStateKeeper:
    def __init__(
        self,
        coordinator: FailoverCoordinator,
        ha: HAService,
        store: MessageStore,
        lag_limit_ms: int,
    ) -> None:
        self.coordinator = coordinator
        self.ha = ha
        self.store = store
        self.lag_limit_ms = lag_limit_ms
        self.me = coordinator.settings.broker_id
        sss = coordinator.sync_state_set
        self.confirmed: frozenset[int] = (
            sss.broker_ids - {self.me} if sss is not None else frozenset()
        )
        self.adding: frozenset[int] = frozenset()
        # HA connection address -> broker id, from the live nodes.
        self._ids: dict[str, int] = {}
        self._identified_ms = -_IDENTIFY_EVERY_MS
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def required(self) -> frozenset[int]:
        return self.confirmed | self.adding

    def start(self) -> None:
        self.ha.ack_policy = self.covered
        self.ha.on_change = self._wake.set
        self._task = asyncio.create_task(self._run(), name="sync-state-keeper")

    async def stop(self) -> None:
        if self.ha.ack_policy == self.covered:
            self.ha.ack_policy = None
            self.ha.on_change = None
        await cancel_and_wait([self._task])
        self._task = None

    # ------------------------------------------------------------------ the ack rule

    def connection_of(self, broker_id: int) -> HAConnection | None:
        for conn in self.ha.connections:
            if self._ids.get(conn.slave_address) == broker_id:
                return conn
        return None

    def covered(self) -> int:
        """The offset every required slave has acknowledged; -1 when none is required."""
        required = self.required
        if not required:
            return -1
        acks = []
        for broker_id in required:
            conn = self.connection_of(broker_id)
            acks.append(max(conn.slave_ack_offset, 0) if conn is not None else 0)
        return min(acks)

    # ------------------------------------------------------------------ the set

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                # that arrives as the event is set, and stop() would wait forever.
                async with asyncio.timeout(_TICK_S):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.step()
            except FailoverError as exc:  # NotMasterError too: the coordinator steps down
                log.warning("sync-state set unchanged: %s", exc)

    async def step(self) -> None:
        """Identify new connections, then remove lagging or gone slaves from the set and add
        caught-up ones (see the module docstring for the order of things)."""
        await self._identify()
        now = self.ha.clock.now_ms()
        drop = set()
        for broker_id in self.required:
            conn = self.connection_of(broker_id)
            if conn is None or conn.lag_ms(now) > self.lag_limit_ms:
                drop.add(broker_id)
        if drop:
            log.warning("broker %d: slaves %s leave the sync-state set (gone or lagging)",
                        self.me, sorted(drop))  # fmt: skip
            sss = await self.coordinator.shrink_sync_state_set(drop)
            self.confirmed = sss.broker_ids - {self.me}
            self.adding -= drop
            self.ha.release()
        grow = set(self.adding)
        for conn in self.ha.connections:
            new = self._ids.get(conn.slave_address)
            if (
                new is not None
                and new != self.me
                and new not in self.required
                and conn.slave_ack_offset >= self.store.acked_through
                # As RocketMQ 5's lastCaughtUpTime: one just dropped for lagging would
                # rejoin at once (nothing was acknowledged without it) and drop again.
                and conn.lag_ms(now) <= self.lag_limit_ms
            ):
                grow.add(new)
        if grow:
            # Required from now on, before ZooKeeper names them (see the module docstring).
            self.adding = frozenset(grow)
            log.info("broker %d: slaves %s join the sync-state set", self.me, sorted(grow))
            sss = await self.coordinator.expand_sync_state_set(grow)
            self.confirmed = sss.broker_ids - {self.me}
            self.adding = frozenset()
            self.ha.release()

    async def _identify(self) -> None:
        unknown = [c for c in self.ha.connections if c.slave_address not in self._ids]
        now = self.ha.clock.now_ms()
        if not unknown or now - self._identified_ms < _IDENTIFY_EVERY_MS:
            return
        self._identified_ms = now
        self._ids = await self.coordinator.followers()
