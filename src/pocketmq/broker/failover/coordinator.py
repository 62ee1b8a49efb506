"""FailoverCoordinator: one broker's seat in the automatic failover of its ``brokerName``, on
ZooKeeper (kazoo), as an asyncio facade.

The coordinator holds a ZooKeeper session; the ephemeral ``master`` node that session creates
is the master's lease. It elects (rule.py says who may win), tells the broker what to be
through a ``RoleListener`` (``become_master(epoch)``; ``become_slave(master, truncate_to)``,
after which the broker's log must end at ``truncate_to``), keeps the local epoch history, and
lets the master change the sync-state set. It does not replicate, refuse writes or register
routes: the broker does, asking ``may_accept_writes()`` before each write it acknowledges.

Threads: kazoo runs its own. Its connection-state listener only flips two fields (so the fence
closes the moment kazoo notices trouble) and hands the event to the loop with
``call_soon_threadsafe``; watches do the same. Blocking kazoo calls run on worker threads.

The fence: ``may_accept_writes()`` is true only for the master while its session is connected
AND a read made less than two thirds of the session timeout ago confirmed that this session
still holds the master node of its epoch. ZooKeeper cannot expire the session, and so let
another broker win an election, before a full session timeout without hearing from it; kazoo
itself drops a connection that goes two thirds of the negotiated timeout without an answer.
So a master that loses its lease (network cut, ZooKeeper stopped or gone) has stopped
accepting writes before any other broker can be elected: no split brain.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.failover import zk_ops
from pocketmq.broker.failover.epoch_file import LocalEpochHistory, epoch_file_path
from pocketmq.broker.failover.model import (
    EpochEntry,
    FailoverError,
    LiveBroker,
    MasterInfo,
    NotMasterError,
    SyncStateSet,
    ZkPaths,
)
from pocketmq.broker.failover.rule import (
    bootstrap_master,
    election_refusal,
    latest_epoch,
    truncation_offset,
)
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.tasks import cancel_and_wait

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
# The share of the session timeout a confirmed read keeps the fence open (see the docstring).
_LEASE_SHARE = 2 / 3


class Role(enum.Enum):
    UNDECIDED = "UNDECIDED"  # starting, or between a lost lease and the next decision
    MASTER = "MASTER"
    SLAVE = "SLAVE"


class RoleListener(Protocol):
    """What the broker does when the coordinator decides its role; awaited on the loop."""

    async def become_master(self, epoch: int) -> None:
        """Take writes as the master of ``epoch`` (stop following any master first)."""

    async def become_slave(self, master: MasterInfo, truncate_to: int) -> None:
        """Stop taking writes, cut the store at ``truncate_to`` (``MessageStore.truncate``),
        then replicate from ``master.ha_addr``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverSettings:
    zk_address: str  # "host:port,host:port"
    session_timeout_ms: int
    zk_root: str
    cluster: str
    broker_name: str
    broker_id: int  # stable within the broker name, 1 or more
    addr: str  # remoting address clients use
    ha_addr: str  # where slaves connect for replication
    store_root: Path

    @classmethod
    def from_broker_config(cls, config: BrokerConfig, ha_port: int) -> FailoverSettings:
        """The settings of a broker whose ``failover_zk_address`` is set, after binding:
        ``ha_port`` is the HA port it bound (its haListenPort may be 0, any free port)."""
        return cls(
            zk_address=config.failover_zk_address,
            session_timeout_ms=config.failover_session_timeout_ms,
            zk_root=config.failover_zk_root,
            cluster=config.broker_cluster_name,
            broker_name=config.broker_name,
            broker_id=config.broker_id,
            addr=config.broker_addr,
            ha_addr=f"{config.broker_ip1}:{ha_port}",
            store_root=config.store.root,
        )


class FailoverCoordinator:
    def __init__(
        self,
        settings: FailoverSettings,
        listener: RoleListener,
        max_offset: Callable[[], int],
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.listener = listener
        # The local CommitLog's max offset (MessageStore.max_phy_offset).
        self._max_offset = max_offset
        self.clock = clock
        self.paths = ZkPaths.of(settings.zk_root, settings.cluster, settings.broker_name)
        self.epochs = LocalEpochHistory(epoch_file_path(settings.store_root))
        self.role = Role.UNDECIDED
        self.epoch = 0  # the epoch this broker is master of, or follows
        self.master: MasterInfo | None = None
        self.sync_state_set: SyncStateSet | None = None
        # Why this broker last declined to stand for election (for logs and tests).
        self.last_refusal: str | None = None
        self._timeout_s = settings.session_timeout_ms / 1000
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lease: zk_ops.Lease | None = None
        # Written from kazoo's thread too: plain assignments, atomic under the GIL.
        self._connected = False
        self._lease_until = 0.0
        self._sss_lock = asyncio.Lock()
        # A write of the sync-state set failed without saying whether it landed.
        self._sss_unsure = False
        # When this broker first said it is live: the first election waits for its peers.
        self._registered_at: float | None = None
        # The local end of this broker's HA connection to its master ("" when not connected),
        # and the (session, address) last published in its live node.
        self._ha_client_addr = ""
        self._published: tuple[int, str] | None = None
        # Called on the loop when this broker becomes master or stops being it.
        self.on_role_change: Callable[[], None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect (within one session timeout), create the broker set's nodes and begin.

        Raises:
            FailoverError: ZooKeeper cannot be reached, or the local epoch file is unreadable.
        """
        self._loop = asyncio.get_running_loop()
        self.epochs.load()
        client = KazooClient(hosts=self.settings.zk_address, timeout=self._timeout_s)
        client.add_listener(self._on_state)
        try:
            await asyncio.to_thread(client.start, self._timeout_s)
            await asyncio.to_thread(zk_ops.ensure_layout, client, self.paths)
        except Exception as exc:
            await asyncio.to_thread(_close_client, client)
            raise FailoverError(
                f"cannot use ZooKeeper at {self.settings.zk_address}: {exc}"
            ) from exc
        self._client = client
        self._connected = True
        self._task = asyncio.create_task(self._run(), name="failover-coordinator")

    async def stop(self) -> None:
        """Close the fence and end the session: the lease ends now, not a timeout later."""
        self._connected = False
        self._lease_until = 0.0
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        client, self._client = self._client, None
        if client is not None:
            try:
                async with asyncio.timeout(self._timeout_s):
                    await asyncio.to_thread(_close_client, client)
            except TimeoutError:
                # kazoo's stop joins its threads; one stuck on a dead connection must not
                # hang the broker's shutdown (they are daemon threads, and the lease is gone).
                log.warning("the ZooKeeper client did not close within %.1f s", self._timeout_s)
        self.role = Role.UNDECIDED

    # ------------------------------------------------------------------ the fence

    def may_accept_writes(self) -> bool:
        """Whether this broker may acknowledge a write now (see the module docstring)."""
        return (
            self.role is Role.MASTER
            and self._connected
            and self.clock.monotonic() < self._lease_until
        )

    # ------------------------------------------------------------------ followers

    def set_ha_client_addr(self, addr: str) -> None:
        """This broker's HA connection to its master now comes from ``addr`` ("": none); it
        is published in the live node, where the master looks it up (``followers``)."""
        if addr != self._ha_client_addr:
            self._ha_client_addr = addr
            self._wake.set()

    async def followers(self) -> dict[str, int]:
        """The live brokers' published HA client addresses, each with its broker id.

        Raises:
            FailoverError: ZooKeeper cannot be read (or is not connected).
        """
        client = self._client
        if client is None or not self._connected:
            raise FailoverError("not connected to ZooKeeper")
        try:
            live = await self._call(zk_ops.live_brokers, client, self.paths)
        except (KazooException, TimeoutError) as exc:
            raise FailoverError(f"cannot read the live brokers: {exc!r}") from exc
        return {b.ha_client_addr: b.broker_id for b in live if b.ha_client_addr}

    def _me(self, max_offset: int) -> LiveBroker:
        return LiveBroker(
            self.settings.broker_id,
            self.settings.addr,
            self.settings.ha_addr,
            max_offset,
            self._ha_client_addr,
        )

    # ------------------------------------------------------------------ sync-state set

    async def shrink_sync_state_set(self, broker_ids: Iterable[int]) -> SyncStateSet:
        """Remove slaves from the sync-state set; returns once ZooKeeper has it, which must
        happen before the master acknowledges anything those slaves lack.

        Raises:
            NotMasterError: this broker is not the master of the current epoch.
            FailoverError: the master itself cannot be removed.
        """
        drop = set(broker_ids)
        if self.settings.broker_id in drop:
            raise FailoverError("the master cannot leave its own sync-state set")
        return await self._change_sync_state_set(lambda ids: ids - drop)

    async def expand_sync_state_set(self, broker_ids: Iterable[int]) -> SyncStateSet:
        """Add slaves that hold everything the master has.

        Raises:
            NotMasterError: this broker is not the master of the current epoch.
        """
        add = set(broker_ids)
        return await self._change_sync_state_set(lambda ids: ids | add)

    async def _change_sync_state_set(
        self, change: Callable[[frozenset[int]], frozenset[int]]
    ) -> SyncStateSet:
        async with self._sss_lock:
            lease, current, client = self._lease, self.sync_state_set, self._client
            if self.role is not Role.MASTER or lease is None or current is None or client is None:
                raise NotMasterError(f"broker {self.settings.broker_id} is not the master")
            wanted = SyncStateSet(self.epoch, change(current.broker_ids))
            if wanted == current and not self._sss_unsure:
                return current
            try:
                self._lease = await self._call(
                    zk_ops.write_sync_state_set, client, self.paths, lease, wanted
                )
            except NotMasterError:
                self._lose_lease("a newer epoch or a lost lease refused the sync-state set")
                raise
            except (KazooException, TimeoutError) as exc:
                # The write may have landed all the same: until one is confirmed, the set in
                # ZooKeeper may differ from ``current``, and a change back to it is written.
                self._sss_unsure = True
                raise NotMasterError(f"the sync-state set was not written: {exc!r}") from exc
            self._sss_unsure = False
            self.sync_state_set = wanted
            return wanted

    # ------------------------------------------------------------------ kazoo's thread

    def _on_state(self, state: str) -> None:
        """kazoo's connection-state listener: runs on kazoo's thread and must not block."""
        if state != KazooState.CONNECTED:
            self._connected = False
            self._lease_until = 0.0
        self._from_kazoo(self._state_changed, state)

    def _on_watch(self, _event: Any) -> None:
        self._from_kazoo(self._wake.set)

    def _from_kazoo(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(callback, *args)

    def _state_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected = True
        elif state == KazooState.LOST:
            # The session expired: its ephemeral nodes, the lease among them, are gone.
            self._lose_lease("the ZooKeeper session expired")
        elif self.role is Role.MASTER:
            self._role_changed()  # the fence closed: not to be registered as master meanwhile
        self._wake.set()

    # ------------------------------------------------------------------ decisions

    async def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A blocking kazoo call on a worker thread, given up after a session timeout."""
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
        # arrives as the call completes, and a stop would then wait forever for this loop.
        async with asyncio.timeout(self._timeout_s):
            return await asyncio.to_thread(fn, *args, **kwargs)

    def _lose_lease(self, why: str) -> None:
        self._lease_until = 0.0
        if self.role is Role.MASTER:
            log.warning("broker %d: no longer master of epoch %d: %s",
                        self.settings.broker_id, self.epoch, why)  # fmt: skip
            self.role = Role.UNDECIDED
            self._lease = None
            self._role_changed()

    def _role_changed(self) -> None:
        if self.on_role_change is not None:
            self.on_role_change()

    async def _run(self) -> None:
        # Renewing the fence needs a read every third of the lease at least.
        tick_s = self._timeout_s * _LEASE_SHARE / 3
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(tick_s):  # not wait_for: see _call
                    await self._wake.wait()
            self._wake.clear()
            if not self._connected:
                continue
            try:
                await self._reconcile()
            except (KazooException, FailoverError, TimeoutError, OSError) as exc:
                log.warning("broker %d: failover step failed: %r", self.settings.broker_id, exc)

    async def _reconcile(self) -> None:
        client = self._client
        assert client is not None
        sent = self.clock.monotonic()
        state = await self._call(zk_ops.read_state, client, self.paths)
        await self._call(client.exists, self.paths.master, watch=self._on_watch)
        session_id = client.client_id[0] if client.client_id else -1
        master = state.master
        if master is None:
            self._lose_lease("the master node is gone")
            await self._contend(client, state)
        elif state.master_owner == session_id:
            if self.role is Role.MASTER and self.epoch == master.epoch:
                was_open = self.may_accept_writes()
                self._lease_until = sent + self._timeout_s * _LEASE_SHARE
                self.sync_state_set = state.sync_state_set
                if not was_open and self.may_accept_writes():
                    self._role_changed()  # the fence reopened
            else:
                # A lease this broker gave up on (a refused transaction): hand it back, so
                # that the election starts over from what ZooKeeper holds.
                await self._call(client.delete, self.paths.master, version=state.master_version)
        elif master.broker_id == self.settings.broker_id:
            # A previous session of this broker still holds the node; it ends with it.
            self._lose_lease("an older session of this broker holds the master node")
        else:
            self._lose_lease(f"broker {master.broker_id} is master")
            await self._follow(state, master)
            published = (session_id, self._ha_client_addr)
            if self.role is Role.SLAVE and self._published != published:
                await self._call(zk_ops.register, client, self.paths, self._me(self._max_offset()))
                self._published = published

    async def _follow(self, state: zk_ops.ClusterState, master: MasterInfo) -> None:
        if self.role is Role.SLAVE and self.master == master:
            return
        cut = truncation_offset(self.epochs.entries, self._max_offset(), state.history)
        log.info("broker %d: following broker %d (epoch %d), log cut at %d",
                 self.settings.broker_id, master.broker_id, master.epoch, cut)  # fmt: skip
        await self.listener.become_slave(master, cut)
        # The log is now a prefix of the master's: the master's history describes it.
        await asyncio.to_thread(self.epochs.replace, state.history)
        self.role, self.master, self.epoch = Role.SLAVE, master, master.epoch
        self.sync_state_set = state.sync_state_set

    async def _contend(self, client: KazooClient, state: zk_ops.ClusterState) -> None:
        me = self.settings.broker_id
        max_offset = self._max_offset()
        await self._call(zk_ops.register, client, self.paths, self._me(max_offset))
        if self._registered_at is None:
            self._registered_at = self.clock.monotonic()
        if state.history:
            refusal = election_refusal(
                me, self.epochs.entries, max_offset, state.history, state.sync_state_set
            )
        elif self.clock.monotonic() - (self._registered_at or 0.0) < self._timeout_s:
            refusal = "the first election waits a session timeout for the other brokers"
        else:
            first = bootstrap_master(await self._call(zk_ops.live_brokers, client, self.paths))
            refusal = None if first == me else f"broker {first} has the most data to start with"
        if refusal is not None:
            if refusal != self.last_refusal:
                log.info("broker %d: not standing for master: %s", me, refusal)
            self.last_refusal = refusal
            return
        self.last_refusal = None
        epoch = latest_epoch(state.history).epoch + 1
        info = MasterInfo(me, self.settings.addr, self.settings.ha_addr, epoch)
        sent = self.clock.monotonic()
        lease = await self._call(zk_ops.try_elect, client, self.paths, state, info, max_offset)
        if lease is None:
            self._wake.set()  # someone else changed the state first: look again
            return
        log.warning("broker %d: elected master of epoch %d at offset %d", me, epoch, max_offset)
        await asyncio.to_thread(
            self.epochs.replace, [*state.history, EpochEntry(epoch, max_offset)]
        )
        self._lease = lease
        self.master, self.epoch = info, epoch
        self.sync_state_set = SyncStateSet(epoch, frozenset({me}))
        self._sss_unsure = False
        await self.listener.become_master(epoch)
        self.role = Role.MASTER
        self._lease_until = sent + self._timeout_s * _LEASE_SHARE
        self._role_changed()
        self._wake.set()


def _close_client(client: KazooClient) -> None:
    client.stop()
    client.close()
