"""StoreCheckpoint: the store timestamps known to be durable, one OS page.

    0   physic msg timestamp (8)   last CommitLog record flushed
    8   logics msg timestamp (8)   last record whose consume-queue unit was flushed
    16  index msg timestamp (8)    last record whose index entries were flushed
    24  master flushed offset (8)  (RocketMQ 5; kept as read)
    32  confirm phy offset (8)     (RocketMQ 5; kept as read)

Abnormal recovery restarts dispatch from the CommitLog file older than min(physic, logics)
minus 3 s (plus the index time when message_index_safe).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from pocketmq.store.layout import CHECKPOINT_FILE_SIZE

_FIELDS = struct.Struct(">qqqqq")


class StoreCheckpoint:
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int
    confirm_phy_offset: int

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size < CHECKPOINT_FILE_SIZE:
            os.posix_fallocate(self._fd, 0, CHECKPOINT_FILE_SIZE)
        self._mm = mmap.mmap(self._fd, CHECKPOINT_FILE_SIZE)
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ) = _FIELDS.unpack_from(self._mm, 0)

    def min_timestamp(self) -> int:
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def flush(self) -> None:
        _FIELDS.pack_into(
            self._mm,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )
        os.fdatasync(self._fd)

    def close(self) -> None:
        if not self._mm.closed:
            self.flush()
            self._mm.close()
            os.close(self._fd)
