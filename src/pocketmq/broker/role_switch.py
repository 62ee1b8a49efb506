"""The broker's role switch under automatic failover: the ``RoleListener`` the failover
coordinator drives (broker/failover/coordinator.py decides; this module carries it out).

- ``become_slave(master, truncate_to)``: refuse writes at once (the store's role), stop the
  master's services and its sync-state keeper, stop following any other master, cut the log
  at ``truncate_to`` when it is longer, follow ``master.ha_addr`` with a new HAClient, copy
  the master's metadata (slave sync) and register with the NameServer under the broker's own
  id.
- ``become_master(epoch)``: stop following, dispatch every replicated byte (so queue offsets
  continue where the old master's stopped), take the configured master role, start the
  sync-state keeper and the master's services, and register as brokerId 0 (the NameServer
  moves the address from its old id). The coordinator opens the write fence only after this
  returns, and records the epoch.

A step that fails raises: the coordinator logs it and asks again (a failed ``become_master``
hands its lease back first). The broker is never left writable by a failure: the store's
role is SLAVE from the first line of ``become_slave`` and until the last step of
``become_master`` that can fail has passed; and writes also need the coordinator's fence.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pocketmq.broker.failover import FailoverCoordinator, MasterInfo
from pocketmq.broker.failover.sync_state import SyncStateKeeper
from pocketmq.store.config import BrokerRole
from pocketmq.store.ha import HAClient

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)


class RoleSwitch:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # Set by the broker once the coordinator exists (it is built with this listener).
        self.coordinator: FailoverCoordinator
        self.keeper: SyncStateKeeper | None = None
        self._lock = asyncio.Lock()

    async def become_slave(self, master: MasterInfo, truncate_to: int) -> None:
        broker, store = self.broker, self.broker.store
        async with self._lock:
            store.role = BrokerRole.SLAVE
            await self._stop_keeper()
            await broker.stop_master_services()
            await self._stop_following()
            if truncate_to < store.max_phy_offset():
                # Nothing appends now: puts are refused and no HA client runs.
                await asyncio.to_thread(store.truncate, truncate_to)
            broker.master_addr, broker.master_ha_addr = master.addr, master.ha_addr
            client = HAClient(store, broker.clock, master.ha_addr)
            client.on_connected = self.coordinator.set_ha_client_addr
            client.start()
            broker.ha_client = client
            broker.start_slave_sync()
            broker.sync_now()
            broker.register_soon()
            log.warning("broker %d: slave of broker %d (%s, epoch %d), log cut at %d",
                        broker.config.broker_id, master.broker_id, master.addr, master.epoch,
                        truncate_to)  # fmt: skip

    async def become_master(self, epoch: int) -> None:
        broker, store = self.broker, self.broker.store
        async with self._lock:
            try:
                await self._stop_following()
                await broker.stop_slave_sync()
                broker.master_addr = broker.master_ha_addr = ""
                # Every replicated byte in the consume queues and the queue offset table.
                store.reput.pump()
                store.acked_through = store.max_phy_offset()
                await self._stop_keeper()
                self.keeper = SyncStateKeeper(
                    self.coordinator,
                    store.ha_service,
                    store,
                    broker.config.store.sync_flush_timeout,
                )
                self.keeper.start()
                await broker.start_master_services()
                store.role = broker.config.store.broker_role
            except BaseException:
                store.role = BrokerRole.SLAVE
                raise
            broker.register_soon()
            log.warning("broker %d: master of epoch %d from offset %d",
                        broker.config.broker_id, epoch, store.acked_through)  # fmt: skip

    async def stop(self) -> None:
        async with self._lock:
            await self._stop_keeper()

    async def _stop_keeper(self) -> None:
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            await keeper.stop()

    async def _stop_following(self) -> None:
        broker = self.broker
        client, broker.ha_client = broker.ha_client, None
        if client is not None:
            await client.stop()
        self.coordinator.set_ha_client_addr("")
