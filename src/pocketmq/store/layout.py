"""On-disk names, magic codes and unit sizes of a RocketMQ 4.x store directory. No I/O here.

{root}/commitlog/{20-digit start offset}          CommitLog segments
{root}/consumequeue/{topic}/{queueId}/{20-digit}  ConsumeQueue files (start offset in bytes)
{root}/index/{yyyyMMddHHmmssSSS}                  index files, named by creation time
{root}/checkpoint                                 flush timestamps (StoreCheckpoint)
{root}/abort                                      present while running: unclean exit marker
{root}/config/*.json                              broker metadata, written atomically
{root}/lock                                       advisory lock: one process per store
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

from pocketmq.protocol.record_codec import BLANK_MAGIC_CODE

COMMITLOG_DIR: Final = "commitlog"
CONSUME_QUEUE_DIR: Final = "consumequeue"
INDEX_DIR: Final = "index"
CONFIG_DIR: Final = "config"
CHECKPOINT_FILE: Final = "checkpoint"
ABORT_FILE: Final = "abort"
LOCK_FILE: Final = "lock"

BLANK_MAGIC: Final = BLANK_MAGIC_CODE
# A file must keep room for a blank record (size + magic) after its last message.
END_FILE_MIN_BLANK_LENGTH: Final = 4 + 4

CQ_UNIT_SIZE: Final = 20  # commitlog offset (8) + size (4) + tag hash code (8)

INDEX_HEADER_SIZE: Final = 40
INDEX_SLOT_SIZE: Final = 4
INDEX_ENTRY_SIZE: Final = 20  # key hash (4) + commitlog offset (8) + time diff s (4) + prev (4)

CHECKPOINT_FILE_SIZE: Final = 4096  # RocketMQ maps one OS page


def offset_file_name(start_offset: int) -> str:
    """A segment's name: its start offset, zero-padded to 20 digits."""
    return f"{start_offset:020d}"


def is_offset_file_name(name: str) -> bool:
    return len(name) == 20 and name.isdigit()


def index_file_name(now_ms: int) -> str:
    """yyyyMMddHHmmssSSS of ``now_ms`` in local time, as UtilAll.timeMillisToHumanString."""
    t = time.localtime(now_ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{now_ms % 1000:03d}"


def commitlog_dir(root: Path) -> Path:
    return root / COMMITLOG_DIR


def consume_queue_dir(root: Path, topic: str, queue_id: int) -> Path:
    return root / CONSUME_QUEUE_DIR / topic / str(queue_id)
