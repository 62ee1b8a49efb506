"""What the failover coordinator keeps in ZooKeeper for one ``brokerName``, and its encoding.
No I/O here.

Nodes under ``{root}/{cluster}/{brokerName}`` (JSON values)::

    master          ephemeral, owned by the master's ZooKeeper session: its lease.
                    {"brokerId": 1, "addr": "host:port", "haAddr": "host:port", "epoch": 3}
    epochs          persistent: the epoch history, oldest first, each epoch with the CommitLog
                    offset its master started writing at (RocketMQ 5's EpochFileCache).
                    [[1, 0], [2, 52311], [3, 90210]]
    syncStateSet    persistent, versioned: the brokers holding every byte acknowledged in the
                    epoch (the master included). {"epoch": 3, "brokerIds": [1, 2]}
    brokers/{id}    ephemeral, one per live broker: {"addr":..., "haAddr":..., "maxOffset": n,
                    "haClientAddr": "host:port"}; the last is where a slave's HA connection to
                    its master comes from ("" while it follows none): how the master knows
                    which broker each of its HA connections is.

Epoch 0 is the log written before any election (a plain master/slave pair, or a new store):
every history implicitly starts with it at offset 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pocketmq.errors import PocketMQError


class FailoverError(PocketMQError):
    """A coordinator request that could not be carried out."""


class NotMasterError(FailoverError):
    """This broker is not (or no longer) the master of the current epoch."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int  # CommitLog offset of the epoch's first byte


@dataclass(frozen=True, slots=True)
class MasterInfo:
    broker_id: int
    addr: str
    ha_addr: str
    epoch: int


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    epoch: int
    broker_ids: frozenset[int]


@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: int
    addr: str
    ha_addr: str
    max_offset: int
    ha_client_addr: str = ""  # the local end of its HA connection to the master, if any


@dataclass(frozen=True, slots=True)
class ZkPaths:
    base: str  # {root}/{cluster}/{brokerName}

    @classmethod
    def of(cls, root: str, cluster: str, broker_name: str) -> ZkPaths:
        return cls(f"{root.rstrip('/')}/{cluster}/{broker_name}")

    @property
    def master(self) -> str:
        return f"{self.base}/master"

    @property
    def epochs(self) -> str:
        return f"{self.base}/epochs"

    @property
    def sync_state_set(self) -> str:
        return f"{self.base}/syncStateSet"

    @property
    def brokers(self) -> str:
        return f"{self.base}/brokers"

    def broker(self, broker_id: int) -> str:
        return f"{self.base}/brokers/{broker_id}"


def _load(raw: bytes, what: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FailoverError(f"{what}: not JSON: {exc}") from exc


def validate_history(history: Sequence[EpochEntry]) -> None:
    """Epochs strictly increase and start offsets never decrease.

    Raises:
        FailoverError: the history breaks either rule.
    """
    for before, after in itertools.pairwise(history):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise FailoverError(f"epoch history out of order: {before} then {after}")
    if history and (history[0].epoch <= 0 or history[0].start_offset < 0):
        raise FailoverError(f"epoch history starts with {history[0]}: epochs start at 1")


def encode_history(history: Sequence[EpochEntry]) -> bytes:
    return orjson.dumps([[e.epoch, e.start_offset] for e in history])


def history_from_json(data: Any, what: str) -> list[EpochEntry]:
    """A history from its JSON form, ``[[epoch, start offset], ...]``.

    Raises:
        FailoverError: ``data`` is anything but a valid history.
    """
    if not isinstance(data, list):
        raise FailoverError(f"{what}: not a list of [epoch, offset]: {data!r}")
    try:
        history = [EpochEntry(int(epoch), int(start)) for epoch, start in data]
    except (TypeError, ValueError) as exc:
        raise FailoverError(f"{what}: not a list of [epoch, offset]: {data!r}") from exc
    validate_history(history)
    return history


def decode_history(raw: bytes) -> list[EpochEntry]:
    """Raises FailoverError for anything but a valid history."""
    return history_from_json(_load(raw, "epochs"), "epochs")


def encode_master(master: MasterInfo) -> bytes:
    return orjson.dumps(
        {
            "brokerId": master.broker_id,
            "addr": master.addr,
            "haAddr": master.ha_addr,
            "epoch": master.epoch,
        }
    )


def decode_master(raw: bytes) -> MasterInfo:
    data = _load(raw, "master")
    try:
        return MasterInfo(
            int(data["brokerId"]), str(data["addr"]), str(data["haAddr"]), int(data["epoch"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FailoverError(f"master: malformed {data!r}") from exc


def encode_sync_state_set(sss: SyncStateSet) -> bytes:
    return orjson.dumps({"epoch": sss.epoch, "brokerIds": sorted(sss.broker_ids)})


def decode_sync_state_set(raw: bytes) -> SyncStateSet:
    data = _load(raw, "syncStateSet")
    try:
        return SyncStateSet(int(data["epoch"]), frozenset(int(i) for i in data["brokerIds"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise FailoverError(f"syncStateSet: malformed {data!r}") from exc


def encode_live(broker: LiveBroker) -> bytes:
    return orjson.dumps(
        {
            "addr": broker.addr,
            "haAddr": broker.ha_addr,
            "maxOffset": broker.max_offset,
            "haClientAddr": broker.ha_client_addr,
        }
    )


def decode_live(broker_id: int, raw: bytes) -> LiveBroker:
    data = _load(raw, f"brokers/{broker_id}")
    try:
        return LiveBroker(
            broker_id,
            str(data["addr"]),
            str(data["haAddr"]),
            int(data["maxOffset"]),
            str(data.get("haClientAddr", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FailoverError(f"brokers/{broker_id}: malformed {data!r}") from exc
