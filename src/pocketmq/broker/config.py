"""BrokerConfig: the broker's settings, with RocketMQ's names (snake_case) and defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.conf import check_port, fields_from_properties, read_properties
from pocketmq.errors import ConfigError
from pocketmq.store.config import StoreConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    # 0 is the master; slaves have positive ids (the role itself is store.broker_role).
    broker_id: int = 0
    # NameServer addresses, ";"-separated; empty: do not register anywhere.
    namesrv_addr: str = ""
    # Address announced to clients and written into records and message ids.
    broker_ip1: str = "127.0.0.1"
    listen_host: str = "127.0.0.1"
    listen_port: int = 10911
    # Create unknown topics on first send from the TBW102 template.
    auto_create_topic_enable: bool = True
    # Create unknown subscription groups on first use.
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 4
    # Whether a topic may be created with message.type=MIXED (RocketMQ 5 refuses it by default;
    # a pocketmq topic without message.type accepts every type anyway).
    enable_mixed_message_type: bool = False
    # Whether a 5.x send's message type must be one its topic's message.type accepts (the
    # proxy's check, on by default).
    enable_topic_message_type_check: bool = True
    # Permissions of the broker as a whole: 6 = read + write.
    broker_permission: int = 6
    # Stamped on every stored message (MSG_REGION, TRACE_ON) and told to producers in each
    # send response, as RocketMQ's send processor does; trace hooks of clients read them.
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # Replies are pushed to their requester; this also keeps them in the reply topic.
    store_reply_message_enable: bool = True
    register_name_server_period: int = 30_000
    # Consumer offsets are persisted this often (ms).
    flush_consumer_offset_interval: int = 5_000
    # How often delay-level progress is saved to delayOffset.json (ms).
    flush_delay_offset_interval: int = 10_000
    # Timer messages may ask for at most this delay (RocketMQ 5: three days).
    timer_max_delay_sec: int = 3 * 24 * 3600
    long_polling_enable: bool = True
    # A slave copies its master's topics, groups, consumer and delay offsets this often (ms):
    # RocketMQ's fixed 10 s; shorter in tests.
    slave_sync_interval: int = 10_000
    # Whether pulls may be sent to a slave while the master is up (RocketMQ's slaveReadEnable):
    # off, a master tells consumers to stay with it (suggestWhichBrokerId 0); on, a master
    # whose consumers lag beyond memory sends them to the group's whichBrokerWhenConsumeSlowly.
    slave_read_enable: bool = False
    # Serve SQL92 subscriptions (RocketMQ's enablePropertyFilter, which is off by default
    # there: pocketmq turns it on, since evaluating a selector costs only the pulls using it).
    enable_property_filter: bool = True
    # A pull without long polling (suspend flag unset) is held at most this long.
    short_polling_time_mills: int = 1_000
    # Consumers silent this long are dropped (CHANNEL_EXPIRED_TIMEOUT).
    channel_expired_timeout: int = 120_000
    # POP consumption by 5.x clients (RocketMQ proxy's names and defaults): the invisible time
    # of push consumers, which the endpoint renews while they are connected; the shortest and
    # longest a simple consumer may ask for; how long before a deadline a renewal happens.
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    renew_ahead_time_millis: int = 10_000
    # Transactions (RocketMQ 5's names and defaults): a half message is first checked with its
    # producer this long after it was born (ms), unless its CHECK_IMMUNITY_TIME_IN_SECONDS
    # says later; the check runs this often (ms); a half checked this many times without an
    # answer is rolled back. rejectTransactionMessage refuses half messages (NO_PERMISSION).
    transaction_time_out: int = 6_000
    transaction_check_interval: int = 30_000
    transaction_check_max: int = 15
    reject_transaction_message: bool = False
    # Automatic failover (broker/failover): the ZooKeeper ensemble, "host:port,host:port";
    # empty (the default) turns it off. On, brokerId is the broker's stable id within its
    # brokerName (1 or more; it registers as 0 while master, as RocketMQ 5's controller mode)
    # and brokerRole is what it runs as when elected (SYNC_MASTER or ASYNC_MASTER).
    failover_zk_address: str = ""
    # The lease: a master that ZooKeeper has not heard from for this long loses it, and one of
    # its in-sync slaves is elected (its fence closes after two thirds of it).
    failover_session_timeout_ms: int = 6_000
    # The ZooKeeper path under which each cluster/brokerName keeps its nodes.
    failover_zk_root: str = "/pocketmq/failover"
    # The broker.conf this broker was started with (RocketMQ 5's brokerConfigPath): where
    # UPDATE_BROKER_CONFIG persists the settings it accepts; None: started without one.
    broker_config_path: Path | None = None
    # Metrics (RocketMQ 5's names and defaults): DISABLE, or PROM for a Prometheus endpoint
    # (GET /metrics) on metricsPromExporterHost (brokerIP1 when blank) and
    # metricsPromExporterPort. RocketMQ's OTLP_GRPC and LOG exporters are refused.
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    # ACL 1.0 (broker/acl): every request needs an account of plain_acl.yml, as RocketMQ's
    # aclEnable; off by default. The file is RocketMQ's ${ROCKETMQ_HOME}/conf/plain_acl.yml
    # (its rocketmq.acl.plain.file property); a relative path is read from the directory the
    # broker runs in. It is looked at for changes this often (ms; RocketMQ: 5 s).
    acl_enable: bool = False
    acl_plain_file: Path = Path("conf/plain_acl.yml")
    acl_file_watch_interval_ms: int = 5_000
    store: StoreConfig = field(default_factory=StoreConfig)

    def __post_init__(self) -> None:
        check_port("listen_port", self.listen_port)
        if self.default_topic_queue_nums <= 0:
            raise ConfigError("default_topic_queue_nums must be positive")
        if self.broker_id < 0:
            raise ConfigError("broker_id must be 0 (master) or positive (slave)")
        if not 0 <= self.broker_permission <= 7:
            raise ConfigError(
                f"broker_permission must be 0..7 (read 4, write 2, inherit 1), got "
                f"{self.broker_permission}"
            )
        if self.failover_enabled:
            self._check_failover()
        elif self.store.broker_role.is_master and self.broker_id != 0:
            raise ConfigError(
                f"broker_id is {self.broker_id} but broker_role is "
                f"{self.store.broker_role.value}: a master's brokerId is 0"
            )
        if not self.store.broker_role.is_master and self.broker_id == 0:
            raise ConfigError("broker_role is SLAVE: a slave's brokerId must be 1 or more")
        if not 0 < self.min_invisible_time_mills_for_recv <= self.max_invisible_time_mills:
            raise ConfigError(
                "min_invisible_time_mills_for_recv must be positive and at most "
                "max_invisible_time_mills"
            )
        if self.renew_ahead_time_millis >= self.default_invisible_time_mills:
            raise ConfigError("renew_ahead_time_millis must be below default_invisible_time_mills")
        if self.metrics_exporter_type not in ("DISABLE", "PROM"):
            raise ConfigError(
                f"metricsExporterType {self.metrics_exporter_type!r} is not served by pocketmq: "
                "use PROM (a Prometheus endpoint) or DISABLE"
            )
        if not 0 <= self.metrics_prom_exporter_port < 65536:
            raise ConfigError("metricsPromExporterPort must be 0..65535")
        if self.slave_sync_interval <= 0:
            raise ConfigError("slave_sync_interval must be positive")
        # Periods of the broker's own loops (RocketMQ's scheduleAtFixedRate refuses 0 too).
        if self.flush_consumer_offset_interval <= 0:
            raise ConfigError("flush_consumer_offset_interval must be positive")
        if self.flush_delay_offset_interval <= 0:
            raise ConfigError("flush_delay_offset_interval must be positive")
        if self.transaction_time_out < 0:
            raise ConfigError("transaction_time_out must be >= 0")
        if self.transaction_check_interval <= 0:
            raise ConfigError("transaction_check_interval must be positive")
        if self.transaction_check_max <= 0:
            raise ConfigError("transaction_check_max must be positive")
        if self.acl_file_watch_interval_ms <= 0:
            raise ConfigError("acl_file_watch_interval_ms must be positive")

    @property
    def register_period_ms(self) -> int:
        """How often the broker registers with its NameServers: registerNameServerPeriod kept
        within 10-60 s, as RocketMQ's BrokerController keeps it (0 would re-register without
        pause)."""
        return max(10_000, min(self.register_name_server_period, 60_000))

    @property
    def metrics_enabled(self) -> bool:
        return self.metrics_exporter_type == "PROM"

    @property
    def failover_enabled(self) -> bool:
        return bool(self.failover_zk_address.strip())

    def _check_failover(self) -> None:
        for server in self.failover_zk_address.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"failover_zk_address: {server.strip()!r} is not host:port "
                    f"(expected host:port[,host:port...])"
                )
        if not 1_000 <= self.failover_session_timeout_ms <= 120_000:
            raise ConfigError("failover_session_timeout_ms must be 1000..120000")
        root = self.failover_zk_root
        if not root.startswith("/") or root.endswith("/") or "//" in root:
            raise ConfigError(f"failover_zk_root must be an absolute ZooKeeper path, got {root!r}")
        if not self.store.broker_role.is_master:
            raise ConfigError(
                "with failover on, broker_role is the role a broker takes when elected: "
                "SYNC_MASTER or ASYNC_MASTER (the coordinator makes it a slave)"
            )
        if self.broker_id < 1:
            raise ConfigError(
                "with failover on, broker_id is the broker's stable id in its broker name: "
                "1 or more (it registers as 0 while it is master)"
            )

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_listen_port(self) -> int:
        """The HA port to bind: the store's setting, else the listen port + 1 (0 stays 0: any
        free port, as tests ask)."""
        if self.store.ha_listen_port is not None:
            return self.store.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)

    def with_port(self, port: int) -> BrokerConfig:
        """The config after binding: the real port, also as the store's host."""
        store = self.store.replace(store_host=f"{self.broker_ip1}:{port}")
        return dataclasses.replace(self, listen_port=port, store=store)

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> BrokerConfig:
        values = fields_from_properties(cls, props)
        if "listen_port" in values:  # before the store's store_host is made of it
            check_port("listen_port", values["listen_port"])
        values.pop("store", None)
        store_overrides = overrides.pop("store_overrides", {})
        values["store"] = StoreConfig.from_properties(props, **store_overrides)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_file(cls, path: Path | str, **overrides: Any) -> BrokerConfig:
        return cls.from_properties(read_properties(path), **overrides)
