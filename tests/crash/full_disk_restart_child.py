"""Query and restart a store on a disk it filled: run inside a mount namespace on a tmpfs of a
few MiB (test_disk_full.py starts it with unshare), once per phase.

    python full_disk_restart_child.py fill STORE_DIR > FILLED
    python full_disk_restart_child.py reopen STORE_DIR FILLED

On tmpfs a read of a hole in a shared mapping allocates the page, and on a full tmpfs that
kills the reader with SIGBUS: every file here is sparse, so each read of bytes that may never
have been written is a risk. ``fill`` appends KEYED messages carrying keys, then messages
without keys until a put is refused, fills the disk's last pages, queries every key sent and
keys never sent (their slots are mostly on pages never written: the slot table is far larger
than the keys touch), and exits without closing the store (its abort marker stays: the next
open recovers abnormally).
``reopen`` opens the store on the still full disk (recovery scans the CommitLog, the consume
queues and the index files to where their data ends), reads every message back, queries the
keys again and verifies the files with ``inspect_store``. Each phase prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from full_disk_child import QUEUES, body, read_back_intact

from pocketmq.protocol.message import MessageExt
from pocketmq.store.config import StoreConfig
from pocketmq.store.inspect import inspect_store
from pocketmq.store.message_store import MessageStore

KEYED = 40
ABSENT = 2_000
MAX_MESSAGES = 100_000


def config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        # Far larger than the disk: only chunk reservations can meet its end.
        mapped_file_size_commit_log=64 << 20,
        # 977 slot pages, an eighth of them reserved one by one before the whole table would
        # be: the keys here touch fewer, so most slot pages stay holes.
        max_hash_slot_num=1_000_000,
        max_index_num=4_000,
        clean_resource_interval=3_600_000,
    )


def message(i: int) -> MessageExt:
    props = {"KEYS": f"k{i}"} if i < KEYED else {}
    return MessageExt(topic="T", body=body(i), queue_id=i % QUEUES, properties=props)


def open_store(root: Path) -> MessageStore:
    store = MessageStore(config(root))
    # Keep the usage-ratio refusal out of it: the reservation itself must refuse.
    store.disk_usage = lambda _path: (10, 100)
    store.open()
    return store


def queries(store: MessageStore) -> dict[str, int]:
    """How many keys sent are found (each once), and how many never sent find anything."""
    now = int(time.time() * 1000) + 60_000
    found = sum(
        len(store.query_message("T", f"k{i}", 32, 0, now).messages) == 1 for i in range(KEYED)
    )
    phantom = sum(
        bool(store.query_message("T", f"absent{j}", 32, 0, now).messages) for j in range(ABSENT)
    )
    return {"keys_found": found, "absent_found": phantom}


def fill(root: Path) -> None:
    store = open_store(root)

    async def go() -> tuple[int, str]:
        for i in range(MAX_MESSAGES):
            result = await store.put_message(message(i))
            if not result.ok:
                return i, f"{result.status.name}: {result.detail}"
        return MAX_MESSAGES, ""

    acked, refusal = asyncio.run(go())
    # The chunk that did not fit is larger than a page: take what is left, to the last page.
    with open(root.parent / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(4096))
        except OSError:
            pass
    result = {"acked": acked, "refusal": refusal, **queries(store)}
    print(json.dumps(result), flush=True)
    os._exit(0)  # no close: the abort marker stays and the next open recovers abnormally


def reopen(root: Path, acked: int) -> None:
    store = open_store(root)
    result: dict[str, object] = {
        "last_exit_ok": store.last_exit_ok,
        "read_back": read_back_intact(store, acked),
        **queries(store),
    }
    store.close()
    report = inspect_store(root, verify=True, config=config(root))
    result["problems"] = report.problems
    result["records"] = report.records
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    phase, where = sys.argv[1], Path(sys.argv[2])
    if phase == "fill":
        fill(where)
    else:
        filled = json.loads(Path(sys.argv[3]).read_text().strip().splitlines()[-1])
        reopen(where, filled["acked"])
