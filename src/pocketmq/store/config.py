"""StoreConfig: the storage engine's settings, with RocketMQ's names (snake_case) and defaults."""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.conf import check_port, fields_from_properties, read_properties
from pocketmq.errors import ConfigError


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"  # ack once in the page cache; a flush thread syncs periodically
    SYNC_FLUSH = "SYNC_FLUSH"  # ack only after fdatasync; concurrent puts share one (group commit)


class BrokerRole(enum.Enum):
    """RocketMQ's brokerRole (a store setting there too)."""

    ASYNC_MASTER = "ASYNC_MASTER"  # ack once stored here; slaves follow when they can
    SYNC_MASTER = "SYNC_MASTER"  # ack once a slave has the bytes too (FLUSH_SLAVE_TIMEOUT)
    SLAVE = "SLAVE"  # a replica of its master's CommitLog: refuses writes, serves reads

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


_TIME_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@functools.lru_cache(maxsize=16)  # read on every 5.x receive and ack
def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Parse ``messageDelayLevel`` ("1s 5s 10s ... 2h"; units ms/s/m/h/d) into milliseconds.

    Raises:
        ConfigError: a level is not a number followed by a unit.
    """
    levels = []
    for item in text.split():
        unit = "ms" if item.endswith("ms") else item[-1:]
        number = item[: -len(unit)]
        if unit not in _TIME_UNITS_MS or not number.isdigit():
            raise ConfigError(
                f"message_delay_level: {item!r} is not a number followed by ms, s, m, h or d"
            )
        levels.append(int(number) * _TIME_UNITS_MS[unit])
    if not levels:
        raise ConfigError("message_delay_level: at least one level is needed")
    return tuple(levels)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    # Root of the store: commitlog/, consumequeue/, index/, checkpoint, abort, config/.
    store_path_root_dir: Path = Path.home() / "store"
    # Bytes per CommitLog segment (1 GiB): sparse at this size, blocks reserved in chunks ahead
    # of the write position (store/reserve.py).
    mapped_file_size_commit_log: int = 1 << 30
    # Bytes per ConsumeQueue file: 300,000 units of 20 bytes.
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    # ASYNC_FLUSH: how often the flush thread syncs the CommitLog.
    flush_interval_commit_log: int = 500
    # How often consume queues, index files and the checkpoint are synced.
    flush_interval_consume_queue: int = 1000
    # SYNC_FLUSH: a put not durable after this many ms returns FLUSH_DISK_TIMEOUT.
    sync_flush_timeout: int = 5000
    # Largest record body accepted; larger ones get MESSAGE_ILLEGAL.
    max_message_size: int = 4 * 1024 * 1024
    # Hours a CommitLog file is kept after its last write.
    file_reserved_time: int = 72
    # Hours of the day (24h clock, ";"-separated) at which expired files are deleted.
    delete_when: str = "04"
    # Disk usage percentage above which expired files are deleted at any hour.
    disk_max_used_space_ratio: int = 75
    # Disk usage percentage above which the oldest files are deleted even if not expired.
    disk_space_clean_forcibly_ratio: int = 85
    # Disk usage percentage above which writes are refused until space is freed.
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    # How often (ms) retention runs.
    clean_resource_interval: int = 10_000
    message_index_enable: bool = True
    # Hash slots and entries per index file (40 + 4*slots + 20*entries bytes).
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    # Abnormal recovery also rewinds to the index checkpoint (slower, index-exact).
    message_index_safe: bool = False
    check_crc_on_recover: bool = True
    # Delay levels for the DELAY property; units ms, s, m, h, d.
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # Written into each record and into offset message ids: "ip:port" of the broker.
    store_host: str = "127.0.0.1:10911"
    # Most bytes and messages returned by one get_message call (pull batch limits).
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    # Most consume-queue units scanned by one get_message call when a filter skips messages.
    max_filter_message_count: int = 16_000
    # A pull that leaves more than this share (%) of the physical memory unread behind it
    # reads from disk: the store suggests the group's slave (accessMessageInMemoryMaxRatio).
    access_message_in_memory_max_ratio: int = 40
    # Replication (RocketMQ 4.x's HAService names and defaults).
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    # The HA port; None: the broker's listen port + 1, as RocketMQ's BrokerStartup sets it.
    ha_listen_port: int | None = None
    # A slave reports its CommitLog offset at least this often (ms); the master sends an empty
    # frame as often when it has nothing new.
    ha_send_heartbeat_interval: int = 5_000
    # A connection silent this long (ms) is closed.
    ha_housekeeping_interval: int = 20_000
    # Most CommitLog bytes in one frame from master to slave.
    ha_transfer_batch_size: int = 32 * 1024
    # A slave's master, "ip:port" of its HA port; empty: the one the NameServer names when the
    # slave registers (RegisterBrokerResult's haServerAddr).
    ha_master_address: str = ""
    # A SYNC_MASTER whose slave lags by this many bytes or more answers SLAVE_NOT_AVAILABLE.
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

        for name in (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "flush_interval_commit_log",
            "flush_interval_consume_queue",
            "sync_flush_timeout",
            "max_message_size",
            "clean_resource_interval",
            "max_hash_slot_num",
            "max_index_num",
            "max_transfer_bytes_on_message_in_memory",
            "max_transfer_count_on_message_in_memory",
            "ha_send_heartbeat_interval",
            "ha_housekeeping_interval",
            "ha_transfer_batch_size",
            "ha_max_gap_not_in_sync",
        ):
            positive(name)
        if self.ha_listen_port is not None:
            check_port("ha_listen_port", self.ha_listen_port)
        if not 0 < self.access_message_in_memory_max_ratio <= 100:
            raise ConfigError(
                "access_message_in_memory_max_ratio must be 1..100, got "
                f"{self.access_message_in_memory_max_ratio}"
            )
        if str(self.store_path_root_dir) in ("", "."):
            raise ConfigError("store_path_root_dir must name a directory")
        if self.file_reserved_time < 0:
            raise ConfigError(f"file_reserved_time must be >= 0, got {self.file_reserved_time}")
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError("mapped_file_size_commit_log must be at least 4096 bytes")
        if self.mapped_file_size_consume_queue % 20:
            raise ConfigError("mapped_file_size_consume_queue must be a multiple of 20 bytes")
        for name in (
            "disk_max_used_space_ratio",
            "disk_space_clean_forcibly_ratio",
            "disk_space_warning_level_ratio",
        ):
            if not 10 <= getattr(self, name) <= 99:
                raise ConfigError(f"{name} must be a percentage between 10 and 99")
        self.delete_hours  # noqa: B018 - validates delete_when
        self.delay_levels_ms  # noqa: B018 - validates message_delay_level
        self.store_host_tuple  # noqa: B018 - validates store_host

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def delete_hours(self) -> frozenset[int]:
        try:
            hours = frozenset(int(h) for h in self.delete_when.split(";") if h.strip())
        except ValueError as exc:
            raise ConfigError(f"delete_when: {self.delete_when!r} is not hours like 04;16") from exc
        if not hours or any(h < 0 or h > 23 for h in hours):
            raise ConfigError(f"delete_when: {self.delete_when!r} must list hours 00..23")
        return hours

    @property
    def store_host_tuple(self) -> tuple[str, int]:
        host, sep, port = self.store_host.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ConfigError(f"store_host: {self.store_host!r} is not ip:port")
        return host.strip("[]"), int(port)

    @property
    def root(self) -> Path:
        return self.store_path_root_dir

    def replace(self, **changes: Any) -> StoreConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> StoreConfig:
        """Build from broker.conf keys; brokerIP1 and listenPort form store_host."""
        values = fields_from_properties(cls, props)
        if "store_host" not in values and ("brokerIP1" in props or "listenPort" in props):
            values["store_host"] = (
                f"{props.get('brokerIP1', '127.0.0.1')}:{props.get('listenPort', '10911')}"
            )
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_file(cls, path: Path | str, **overrides: Any) -> StoreConfig:
        return cls.from_properties(read_properties(path), **overrides)
