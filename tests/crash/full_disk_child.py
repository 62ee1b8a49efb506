"""Fill a real, small disk through the store, then read everything back: run inside a mount
namespace on a tmpfs of a few MiB (test_disk_full.py starts it with unshare).

    python full_disk_child.py STORE_DIR

Appends 1 KiB messages until a put is refused. Files are sparse and reserved a chunk at a time,
so the refusal comes from a chunk reservation inside an existing CommitLog segment; the process
must survive it (a write into an unreserved page of the mapping would kill it with SIGBUS).
Then it reads every acknowledged message back, tries a few more puts, and prints one JSON
object: acked, the first refusal, the messages read back, and the later puts' statuses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from pocketmq.protocol.message import MessageExt
from pocketmq.store.config import StoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetStatus, PutResult

QUEUES = 4
MAX_MESSAGES = 100_000


def body(i: int) -> bytes:
    return i.to_bytes(4, "big") * 256


def read_back_intact(store: MessageStore, acked: int) -> int:
    """Messages 0..acked-1 of topic T read back intact (queue q holds q, q + QUEUES, ... in
    order)."""
    count = 0
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            got = store.get_message("T", queue_id, offset, 256)
            if got.status is not GetStatus.FOUND:
                break
            for n, raw in enumerate(got.messages, start=offset):
                i = queue_id + n * QUEUES
                count += i < acked and body(i) in raw
            offset = got.next_begin_offset
    return count


def main() -> None:
    config = StoreConfig(
        store_path_root_dir=Path(sys.argv[1]),
        # Far larger than the disk: only chunk reservations can meet its end.
        mapped_file_size_commit_log=64 << 20,
        max_hash_slot_num=1000,
        max_index_num=4000,
        clean_resource_interval=3_600_000,
    )
    store = MessageStore(config)
    # Keep the usage-ratio refusal out of it: the reservation itself must refuse.
    store.disk_usage = lambda _path: (10, 100)
    store.open()

    def message(i: int) -> MessageExt:
        props = {"KEYS": f"k{i}", "UNIQ_KEY": f"u{i}"}
        return MessageExt(topic="T", body=body(i), queue_id=i % QUEUES, properties=props)

    async def fill() -> tuple[int, PutResult | None, list[str]]:
        for i in range(MAX_MESSAGES):
            result = await store.put_message(message(i))
            if not result.ok:
                later = [(await store.put_message(message(i))).status.name for _ in range(3)]
                return i, result, later
        return MAX_MESSAGES, None, []

    acked, refusal, later = asyncio.run(fill())
    read_back = read_back_intact(store, acked)
    store.close()
    print(
        json.dumps(
            {
                "acked": acked,
                "refusal": None if refusal is None else refusal.status.name,
                "detail": None if refusal is None else refusal.detail,
                "read_back": read_back,
                "later": later,
            }
        )
    )


if __name__ == "__main__":
    main()
