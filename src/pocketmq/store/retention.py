"""Retention (RocketMQ's CleanCommitLogService): CommitLog segments older than
fileReservedTime go at deleteWhen hours, earlier when the disk passes diskMaxUsedSpaceRatio,
one segment at a time past diskSpaceCleanForciblyRatio; then the consume-queue and index files
that only point at removed records. The disk check that refuses writes on a full disk lives
here too. Runs on the store's housekeeping thread.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)


def check_disk(store: MessageStore) -> None:
    """Refuse writes while the disk is past diskSpaceWarningLevelRatio, accept them again
    below it."""
    used, total = store.disk_usage(store.commitlog.mfq.directory)
    ratio = used * 100 / total if total else 0
    full = ratio >= store.config.disk_space_warning_level_ratio
    if full != store.disk_full:
        if full:
            log.error("disk %.1f%% used: refusing writes", ratio)
        else:
            log.warning("disk %.1f%% used: accepting writes again", ratio)
        store.disk_full = full


def run_retention(store: MessageStore) -> int:
    """Delete expired CommitLog files (CleanCommitLogService), then the consume-queue and
    index files that only point at removed records. Returns the CommitLog files removed."""
    cfg = store.config
    now = store.clock.now_ms()
    used, total = store.disk_usage(store.commitlog.mfq.directory)
    ratio = used * 100 / total if total else 0
    hour_ok = time.localtime(now / 1000).tm_hour in cfg.delete_hours
    space_needed = ratio >= cfg.disk_max_used_space_ratio
    forcibly = cfg.clean_file_forcibly_enable and ratio >= cfg.disk_space_clean_forcibly_ratio
    if not (hour_ok or space_needed or forcibly):
        return 0
    mfq = store.commitlog.mfq
    reserved_ms = cfg.file_reserved_time * 3_600_000
    victims = mfq.expired_candidates(reserved_ms, now) if hour_ok or space_needed else []
    if forcibly and not victims:
        # Space is short and nothing has expired: give up the oldest segment.
        victims = mfq.expired_candidates(0, now)[:1]
    # At most ten per run, as RocketMQ, and never bytes that are not durable yet.
    victims = [v for v in victims[:10] if v.file_end_offset <= mfq.flushed_where]
    removed = 0
    for mf in victims:
        if mfq.first() is not mf:
            break
        mfq.delete_first()
        removed += 1
        log.info("retention deleted commitlog segment %s", mf.path.name)
    if removed:
        commitlog_min = store.commitlog.min_offset()
        for cq in store.all_queues():
            cq.delete_expired_files(commitlog_min)
            cq.correct_min_offset(commitlog_min)
        if cfg.message_index_enable:
            store.index.delete_expired(commitlog_min)
    return removed
