"""Consumer offsets (ConsumerOffsetManager), persisted in {store}/config/consumerOffset.json.

Keyed ``topic@group`` -> {queue id: next offset to consume}, as RocketMQ writes the file.
Pull offsets (where each group's last pull of a queue got to) are kept in memory only, as in
RocketMQ: they only feed GET_CONSUME_STATS and start empty after a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pocketmq.jsonfile import PersistedJson, read_json


class ConsumerOffsetManager(PersistedJson):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.pull_table: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        data = read_json(self.path)
        if isinstance(data, dict):
            for key, queues in (data.get("offsetTable") or {}).items():
                self.table[key] = {int(q): int(o) for q, o in queues.items()}

    def put_all(self, table: dict[str, dict[int, int]]) -> None:
        """A slave takes its master's offsets (ConsumerOffsetSerializeWrapper's offsetTable):
        each ``topic@group`` the master has replaces this one's, the others stay, as
        SlaveSynchronize's putAll; then the file is written."""
        self.table.update(table)
        self._dirty = True
        self.persist()

    def encode(self) -> dict[str, dict[str, dict[int, int]]]:
        """The ConsumerOffsetSerializeWrapper the file holds and GET_ALL_CONSUMER_OFFSET
        answers."""
        return {"offsetTable": self.table}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.setdefault(f"{topic}@{group}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if none."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def commit_pull(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def query_pull(self, group: str, topic: str, queue_id: int) -> int:
        """Where the group's last pull of the queue got to, else its committed offset, else -1."""
        offset = self.pull_table.get(f"{topic}@{group}", {}).get(queue_id)
        return self.query(group, topic, queue_id) if offset is None else offset

    def _topic_groups(self) -> Iterator[tuple[str, str]]:
        for key in self.table:
            parts = key.split("@")
            if len(parts) == 2:
                yield parts[0], parts[1]

    def topics_of_group(self, group: str) -> set[str]:
        """The topics the group has committed offsets for (whichTopicByConsumer)."""
        return {t for t, g in self._topic_groups() if g == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        """The groups with committed offsets in topic (whichGroupByTopic)."""
        return {g for t, g in self._topic_groups() if t == topic}

    def clone(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Give dest_group src_group's offsets in topic (cloneOffset: the destination's
        queues are replaced as a whole); False when the source has none there."""
        queues = self.table.get(f"{topic}@{src_group}")
        if queues is None:
            return False
        self.table[f"{topic}@{dest_group}"] = dict(queues)
        self._dirty = True
        return True
