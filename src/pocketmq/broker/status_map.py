"""The one table from store outcomes to remoting response codes (SendMessageProcessor,
PullMessageProcessor)."""

from __future__ import annotations

from pocketmq.protocol.codes import ResponseCode
from pocketmq.store import GetStatus, PutStatus

PUT_STATUS_CODES: dict[PutStatus, tuple[int, str]] = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, ""),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, ""),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, ""),
    PutStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, ""),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full, messages are put to the slave, permission denied",
    ),
    PutStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, ""),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, ""),
    PutStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def pull_code(status: GetStatus, requested_offset: int) -> int:
    """PullMessageProcessor's mapping of a GetMessageStatus."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.MESSAGE_WAS_REMOVING, GetStatus.NO_MATCHED_MESSAGE):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return (
            ResponseCode.PULL_OFFSET_MOVED if requested_offset != 0 else ResponseCode.PULL_NOT_FOUND
        )
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL
