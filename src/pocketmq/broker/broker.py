"""Broker: the store, the remoting server and the background duties (BrokerController).

Start order: bind the listening socket (so the real port is known), open the store with that
address as its store host, load topics and offsets, then what is built on them (delay levels,
timers, POP, open transactions), register the handlers, then accept connections and register
with every NameServer, again every 30 s and at once after a topic changes. Stop order is the
reverse; the store is closed last, cleanly.

The role decides the duties. A master runs the services that write (delay levels, timers,
POP revives, transaction checks) and its endpoints for 5.x clients; a slave runs none of
them and copies its master's metadata instead (``slave_sync``). Each set starts and stops
with one method, so that a role change is a stop of one and a start of the other.

The current role is ``store.role``, the one place every reader asks; ``config.store.
broker_role`` is the configured one. With ``failoverZkAddress`` set, the broker starts as a
slave that follows nobody, and a ``FailoverCoordinator`` decides its role through
``role_switch.RoleSwitch``; the coordinator's fence gates every write (``store.write_fence``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import zlib
from collections.abc import Awaitable, Callable
from typing import Protocol

from pocketmq.broker.acl import AclService
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.consumers import ConsumerManager
from pocketmq.broker.failover import FailoverCoordinator, FailoverError, FailoverSettings
from pocketmq.broker.handlers import register_all
from pocketmq.broker.locks import RebalanceLockManager
from pocketmq.broker.messaging import MessagingService
from pocketmq.broker.metrics import MetricsEndpoint, RpcLatency, TimedDispatcher
from pocketmq.broker.offsets import ConsumerOffsetManager
from pocketmq.broker.pop import PopService
from pocketmq.broker.pull_hold import PullHold
from pocketmq.broker.role_switch import RoleSwitch
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.slave_sync import SlaveSynchronize
from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from pocketmq.broker.timer import TimerMessageService
from pocketmq.broker.topics import TopicConfigManager
from pocketmq.broker.transaction import ProducerRegistry, RemotingChecker, TransactionService
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import ConfigError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import SCHEDULE_TOPIC, TIMER_TOPIC
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import (
    Dispatcher,
    RemotingChannel,
    RemotingClient,
    RemotingServer,
    RequestHandler,
)
from pocketmq.store import MessageStore
from pocketmq.store.config import BrokerRole
from pocketmq.store.ha import HAClient, ReplicationState
from pocketmq.store.layout import CONFIG_DIR
from pocketmq.tasks import cancel_and_wait, run_when_due

log = logging.getLogger(__name__)


class MasterEndpoint(Protocol):
    """A server only a master runs beside its remoting port (the gRPC endpoint): started
    when the broker is or becomes master, stopped when it stops or becomes a slave."""

    async def start(self) -> int: ...

    async def stop(self) -> None: ...


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.store: MessageStore
        self.topics: TopicConfigManager
        self.offsets: ConsumerOffsetManager
        self.subscription_groups: SubscriptionGroupManager
        self.schedule: ScheduleMessageService
        self.timer: TimerMessageService
        self.pop: PopService
        self.messaging: MessagingService
        self.transactions: TransactionService
        self.consumers = ConsumerManager(config.channel_expired_timeout, clock=clock)
        self.producers = ProducerRegistry(config.channel_expired_timeout, clock=clock)
        self.pull_hold = PullHold()
        self.stats = BrokerStatsManager(config.broker_cluster_name, clock)
        self.locks = RebalanceLockManager(clock=clock)
        # The Prometheus endpoint (metricsExporterType=PROM) and the request timing it reports.
        self.rpc_latency = RpcLatency()
        self.metrics: MetricsEndpoint | None = None
        self.dispatcher = (
            TimedDispatcher(self.rpc_latency) if config.metrics_enabled else Dispatcher()
        )
        self.server: RemotingServer | None = None
        self.namesrv_client = RemotingClient()
        self._tasks: list[asyncio.Task[None]] = []
        self._register_now = asyncio.Event()
        # A slave's master as the NameServer names it in its answer to REGISTER_BROKER: the
        # remoting address (config sync) and the HA address (replication); "" until known.
        self.master_addr = ""
        self.master_ha_addr = ""
        self.master_endpoints: list[MasterEndpoint] = []
        self.master_services_running = False
        self._slave_sync_task: asyncio.Task[None] | None = None
        self._sync_now = asyncio.Event()
        # The bound HA port (RocketMQ's haServerAddr); a slave's client of its master's.
        self.ha_port = 0
        self.ha_client: HAClient | None = None
        # Automatic failover (failoverZkAddress): who decides this broker's role, and how.
        self.coordinator: FailoverCoordinator | None = None
        self.role_switch: RoleSwitch | None = None
        # aclEnable: checks every request before the dispatcher, and the gRPC endpoint's.
        self.acl: AclService | None = None

    @property
    def port(self) -> int:
        return self.config.listen_port

    async def start(self) -> int:
        """Open the store, start every service and listen; the bound port comes back.

        Raises:
            ConfigError: failover is configured and ZooKeeper cannot be used; ACL is on and
                its file is not valid; the HA port cannot be bound (the broker stops).
        """
        if self.config.acl_enable:
            acl = AclService(
                self.config.acl_plain_file,
                watch_interval_ms=self.config.acl_file_watch_interval_ms,
            )
            # First: a bad file stops the start before anything is opened.
            await asyncio.to_thread(acl.load)
            self.acl = acl
        sock = socket.create_server((self.config.listen_host, self.config.listen_port))
        # Read before the real port replaces 0: listen port 0 asks for any free HA port too.
        ha_port = self.config.ha_listen_port
        try:
            self.config = self.config.with_port(sock.getsockname()[1])
            self.store = MessageStore(self.config.store, clock=self.clock)
            if self.config.failover_enabled:
                # No write before the coordinator has elected this broker.
                self.store.role = BrokerRole.SLAVE
            await asyncio.to_thread(self.store.open)
        except BaseException:
            sock.close()
            raise
        config_dir = self.config.store.root / CONFIG_DIR
        self.topics = TopicConfigManager(
            config_dir / "topics.json",
            cluster=self.config.broker_cluster_name,
            broker_name=self.config.broker_name,
            auto_create=self.config.auto_create_topic_enable,
            default_queue_nums=self.config.default_topic_queue_nums,
            clock=self.clock,
        )
        self.topics.on_created = self.register_soon
        self.topics.load()
        self.topics.persist()
        self.offsets = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.offsets.load()
        self.subscription_groups = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json",
            self.config.auto_create_subscription_group,
            clock=self.clock,
        )
        self.subscription_groups.load()
        self.schedule = ScheduleMessageService(
            self.store, config_dir / "delayOffset.json", clock=self.clock
        )
        self.schedule.load()
        self.timer = TimerMessageService(
            self.store,
            config_dir / "timercheck.json",
            self.config.timer_max_delay_sec,
            clock=self.clock,
        )
        self.timer.load()
        self.messaging = MessagingService(self)
        self.pop = PopService(
            self.store,
            self.offsets,
            self.topics,
            self.config.broker_cluster_name,
            self.config.broker_name,
            self.max_delivery_attempts,
            self.messaging,
            clock=self.clock,
        )
        self.pop.load()
        self.transactions = TransactionService(
            self.store, self.offsets, self.topics, self.producers, self.config, clock=self.clock
        )
        self.transactions.load()
        self.store.on_message_arrived = self._on_message_arrived
        try:
            self.ha_port = await self.store.ha_service.start(self.config.listen_host, ha_port)
        except OSError as exc:
            sock.close()
            await self.stop()
            raise ConfigError(
                f"haListenPort {ha_port} (the listen port + 1 unless set): {exc.strerror or exc}"
            ) from exc
        if not self.is_master and not self.config.failover_enabled:
            self.ha_client = HAClient(self.store, self.clock, self.config.store.ha_master_address)
            self.ha_client.start()
        register_all(self, self.dispatcher)
        handler: RequestHandler = self.dispatcher
        if self.acl is not None:
            self.acl.watch()
            handler = self.acl.gate(self.dispatcher)
        self.server = RemotingServer(handler, idle_timeout_s=120)
        await self.server.start(sock=sock)
        self.server.on_channel_closed = self._on_channel_closed
        if self.config.metrics_enabled:
            await self._start_metrics()
        self._every(self.config.flush_consumer_offset_interval, self._persist_offsets)
        self._every(10_000, self._scan_consumers)
        self._tasks.append(asyncio.create_task(run_when_due(self._sample_stats, asyncio.Event())))
        self._tasks.append(asyncio.create_task(self._register_loop()))
        if self.is_master:
            await self.start_master_services()
        else:
            self.start_slave_sync()
        self._every(self.config.flush_delay_offset_interval, self.schedule.persist_off_loop)
        self._every(self.config.flush_delay_offset_interval, self.timer.persist_off_loop)
        if self.config.failover_enabled:
            try:
                await self._start_failover()
            except ConfigError:
                await self.stop()
                raise
        log.info("broker %s listening on %s", self.config.broker_name, self.config.broker_addr)
        return self.port

    async def _start_metrics(self) -> None:
        """Raises: ConfigError: the metrics port cannot be bound (the broker stops)."""
        config = self.config
        endpoint = MetricsEndpoint(self, self.rpc_latency)
        try:
            await endpoint.start(
                config.metrics_prom_exporter_host or config.broker_ip1,
                config.metrics_prom_exporter_port,
            )
        except OSError as exc:
            await self.stop()
            raise ConfigError(
                f"metricsPromExporterPort {config.metrics_prom_exporter_port}: {exc}"
            ) from exc
        self.metrics = endpoint

    @property
    def is_master(self) -> bool:
        return self.store.role.is_master

    @property
    def registered_id(self) -> int:
        """The brokerId this broker registers under: its own, or 0 while it is the failover
        master with a confirmed lease (so that routes and clients take it for the master)."""
        if self.coordinator is not None and self.is_master and self.store.may_write():
            return 0
        return self.config.broker_id

    async def _start_failover(self) -> None:
        """Join the failover of the broker name (the coordinator elects or makes it follow).

        Raises:
            ConfigError: ZooKeeper cannot be reached, or the local epoch file is unreadable.
        """
        settings = FailoverSettings.from_broker_config(self.config, self.ha_port)
        self.role_switch = RoleSwitch(self)
        coordinator = FailoverCoordinator(
            settings, self.role_switch, self.store.max_phy_offset, clock=self.clock
        )
        # A master that gains or loses its lease registers again, as brokerId 0 or its own.
        coordinator.on_role_change = self.register_soon
        self.store.write_fence = coordinator.may_accept_writes
        self.coordinator = self.role_switch.coordinator = coordinator
        try:
            await coordinator.start()
        except FailoverError as exc:
            self.coordinator = None
            raise ConfigError(str(exc)) from exc

    # ------------------------------------------------------------------ role duties

    async def start_master_services(self) -> None:
        """Start what only a master runs: delay levels, timers, POP revives, transaction
        checks and the master endpoints (startProcessorByHa, handleScheduleMessageService)."""
        if self.master_services_running:
            return
        self.master_services_running = True
        await self.schedule.start()
        await self.timer.start()
        await self.pop.start()
        await self.transactions.start()
        for endpoint in self.master_endpoints:
            await endpoint.start()

    async def stop_master_services(self) -> None:
        """Stop them again (a broker that stops, or becomes a slave); their progress is
        persisted."""
        if not self.master_services_running:
            return
        self.master_services_running = False
        for endpoint in self.master_endpoints:
            await endpoint.stop()
        await self.transactions.stop()
        await self.schedule.stop()
        await self.timer.stop()
        await self.pop.stop()

    async def add_master_endpoint(self, endpoint: MasterEndpoint) -> None:
        """Run ``endpoint`` whenever this broker is master, from now on if it is.

        Raises:
            OSError: the endpoint cannot bind (it is not kept).
        """
        if self.master_services_running:
            await endpoint.start()
        self.master_endpoints.append(endpoint)

    def sync_now(self) -> None:
        """Copy the master's metadata at once (a new master is known)."""
        self._sync_now.set()

    def start_slave_sync(self) -> None:
        """Copy the master's metadata every ``slave_sync_interval``, and at once whenever
        registration names a new master (handleSlaveSynchronize)."""
        if self._slave_sync_task is None:
            self._slave_sync_task = asyncio.create_task(self._slave_sync_loop())

    async def stop_slave_sync(self) -> None:
        await cancel_and_wait([self._slave_sync_task])
        self._slave_sync_task = None

    async def _slave_sync_loop(self) -> None:
        sync = SlaveSynchronize(self)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.slave_sync_interval / 1000):
                    await self._sync_now.wait()
            self._sync_now.clear()
            master = self.master_addr
            if master and master != self.config.broker_addr:
                await sync.sync_all(master)

    def _on_message_arrived(self, topic: str, queue_id: int, queue_offset: int) -> None:
        self.pull_hold.notify(topic, queue_id, queue_offset)
        self.pop.notify(topic)
        # The schedule and timer services read arrivals in their own topics only.
        if topic == SCHEDULE_TOPIC:
            self.schedule.on_message_arrived(topic, queue_id, queue_offset)
        elif topic == TIMER_TOPIC:
            self.timer.on_message_arrived(topic, queue_id, queue_offset)

    async def _sample_stats(self) -> int:
        return self.stats.sample()

    def max_delivery_attempts(self, group: str) -> int:
        """Deliveries of a message to a 5.x consumer group before its DLQ: retryMaxTimes + 1."""
        cfg = self.subscription_groups.find(group) or SubscriptionGroupConfig(group)
        return cfg.retry_max_times + 1

    def _every(self, interval_ms: int, fn: Callable[[], Awaitable[None] | None]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    result = fn()
                    if result is not None:
                        await result
                except Exception:  # a task boundary: log and keep the duty running
                    log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

        self._tasks.append(asyncio.create_task(loop()))

    async def _persist_offsets(self) -> None:
        _persist_each(self.pop.persist)  # into the offsets table: written just below
        await self.offsets.persist_off_loop()

    def _scan_consumers(self) -> None:
        self.consumers.scan_expired()
        self.producers.scan_expired()

    def _on_channel_closed(self, channel: RemotingChannel) -> None:
        self.consumers.on_channel_closed(channel)
        self.producers.unregister_checker(RemotingChecker(channel, self.config.broker_name))

    # ------------------------------------------------------------------ NameServer

    def register_soon(self) -> None:
        self._register_now.set()

    async def _register_loop(self) -> None:
        while True:
            try:
                await self.register_all()
            except Exception:  # a task boundary: a dead loop would let the routes expire
                log.exception("registration with the name servers failed; retrying")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.register_period_ms / 1000):
                    await self._register_now.wait()
            self._register_now.clear()

    def _register_request(self) -> RemotingCommand:
        body = json_body.dumps(
            {
                "topicConfigSerializeWrapper": self.topics.wrapper(self.config.broker_permission),
                "filterServerList": [],
            }
        )
        return RemotingCommand.request(
            RequestCode.REGISTER_BROKER,
            {
                "brokerName": self.config.broker_name,
                "brokerAddr": self.config.broker_addr,
                "clusterName": self.config.broker_cluster_name,
                "haServerAddr": f"{self.config.broker_ip1}:{self.ha_port}",
                "brokerId": self.registered_id,
                "compressed": False,
                "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF,
            },
            body,
        )

    async def register_all(self) -> None:
        for addr in self.config.namesrv_addrs:
            try:
                resp = await self.namesrv_client.invoke(addr, self._register_request(), 3)
                if resp.code != ResponseCode.SUCCESS:
                    log.warning("name server %s refused registration: %s", addr, resp.remark)
                elif not self.is_master and self.coordinator is None:
                    # Under failover the coordinator names the master, not the NameServer.
                    self._learn_master(resp.ext_fields)
            except (ConnectionError, TimeoutError) as exc:
                log.warning("cannot register with name server %s: %s", addr, exc)
            except Exception:  # one name server's failure must not skip the others
                log.exception("cannot register with name server %s", addr)

    def _learn_master(self, answer: dict[str, str]) -> None:
        master, ha = answer.get("masterAddr") or "", answer.get("haServerAddr") or ""
        if (master, ha) != (self.master_addr, self.master_ha_addr):
            log.info("master of %s: %s (HA %s)", self.config.broker_name, master or "-", ha or "-")
            if master and master != self.master_addr:
                self._sync_now.set()
            self.master_addr, self.master_ha_addr = master, ha
        if self.ha_client is not None and not self.config.store.ha_master_address:
            self.ha_client.update_master_address(ha)

    def replication_state(self) -> ReplicationState:
        """Who this broker replicates to and from, for admin and runtime info."""
        return ReplicationState(
            role=self.store.role.value,
            serving=self.store.ha_service.state(),
            following=self.ha_client.state() if self.ha_client is not None else None,
        )

    async def _unregister_all(self) -> None:
        for addr in self.config.namesrv_addrs:
            req = RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": self.config.broker_name,
                    "brokerAddr": self.config.broker_addr,
                    "clusterName": self.config.broker_cluster_name,
                    "brokerId": self.registered_id,
                },
            )
            with contextlib.suppress(ConnectionError, TimeoutError):
                await self.namesrv_client.invoke(addr, req, 3)

    # ------------------------------------------------------------------ stop

    async def stop(self) -> None:
        if self.coordinator is not None:
            # The lease ends now (a slave may be elected at once), and the fence closes.
            await self.coordinator.stop()
        if self.role_switch is not None:
            await self.role_switch.stop()
        await self.stop_master_services()
        await self.stop_slave_sync()
        await cancel_and_wait(self._tasks)
        await self._unregister_all()
        await self.namesrv_client.close()
        self.pull_hold.wake_all()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.server is not None:
            await self.server.stop()
        if self.ha_client is not None:
            await self.ha_client.stop()
        await self.store.ha_service.stop()
        _persist_each(self.offsets.persist, self.topics.persist)  # the store closes regardless
        await asyncio.to_thread(self.store.close)
        if self.acl is not None:
            await self.acl.stop()


def _persist_each(*persists: Callable[[], None]) -> None:
    """Write each file on its own: one that cannot be written is logged and must not keep the
    others stale (a task boundary, as in ``_every``)."""
    for persist in persists:
        try:
            persist()
        except Exception:
            log.exception("persisting %s failed", getattr(persist, "__qualname__", persist))
