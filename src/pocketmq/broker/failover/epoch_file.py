"""The local epoch history: which epochs the bytes of this broker's CommitLog belong to, kept
in ``{store}/config/failoverEpochs.json`` (RocketMQ 5 keeps it in its epochFileCheckpoint).

A master appends its new epoch (with its max offset) before it takes a write; a slave, once it
has cut its log to follow a master, takes the master's history, which then describes its log
(a prefix of the master's). Written atomically (pocketmq.jsonfile).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pocketmq.broker.failover.model import EpochEntry, history_from_json, validate_history
from pocketmq.jsonfile import read_json, write_json_atomic
from pocketmq.store.layout import CONFIG_DIR

EPOCH_FILE = "failoverEpochs.json"


def epoch_file_path(store_root: Path) -> Path:
    return store_root / CONFIG_DIR / EPOCH_FILE


class LocalEpochHistory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[EpochEntry] = []

    def load(self) -> list[EpochEntry]:
        """Read the file (an absent one: no epoch yet).

        Raises:
            FailoverError: the file holds something else than a valid history.
            StoreError: neither the file nor its backup can be read.
        """
        data = read_json(self.path)
        if data is None:
            self.entries = []
            return []
        entries = history_from_json(data, str(self.path))
        self.entries = entries
        return entries

    def replace(self, entries: Sequence[EpochEntry]) -> None:
        """Store ``entries`` as the history (durably, before returning)."""
        validate_history(entries)
        write_json_atomic(self.path, [[e.epoch, e.start_offset] for e in entries])
        self.entries = list(entries)
