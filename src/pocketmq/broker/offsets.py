"""Consumer offsets (ConsumerOffsetManager), persisted in {store}/config/consumerOffset.json.

Keyed ``topic@group`` -> {queue id: next offset to consume}, as RocketMQ writes the file.
"""

from __future__ import annotations

from pathlib import Path

from pocketmq.store.config_file import read_json, write_json_atomic


class ConsumerOffsetManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        data = read_json(self.path)
        if isinstance(data, dict):
            for key, queues in (data.get("offsetTable") or {}).items():
                self.table[key] = {int(q): int(o) for q, o in queues.items()}

    def persist(self) -> None:
        if self._dirty:
            self._dirty = False
            write_json_atomic(self.path, {"offsetTable": self.table})

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.setdefault(f"{topic}@{group}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if none."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id, -1)
