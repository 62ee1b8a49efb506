"""The one table from store outcomes to remoting response codes (SendMessageProcessor,
PullMessageProcessor), and the answers of a slave to what it does not serve. No I/O here."""

from __future__ import annotations

from pocketmq.broker.subscription_groups import SubscriptionGroupConfig
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.names import MASTER_ID
from pocketmq.store import GetResult, GetStatus, PutStatus

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


# What a write sent to a slave is answered: SendMessageProcessor's remark for the store's
# SERVICE_NOT_AVAILABLE, which names the slave among its causes, then the cause itself.
SLAVE_REFUSAL = (
    PUT_STATUS_CODES[PutStatus.SERVICE_NOT_AVAILABLE][1]
    + ". This broker is a slave (brokerRole=SLAVE): send to the master of its brokerName"
)
# EndTransactionProcessor's answer on a slave.
FENCED_REFUSAL = (
    PUT_STATUS_CODES[PutStatus.SERVICE_NOT_AVAILABLE][1]
    + ". This broker's master lease is not confirmed (failover): send again, to the new master"
)
SLAVE_END_TRANSACTION_REFUSAL = "Message store is slave mode, so end transaction is forbidden."


def pull_answer(
    result: GetResult, offset: int, group: SubscriptionGroupConfig, *,
    slave_read_enable: bool, slave: bool,
) -> tuple[int, int]:  # fmt: skip
    """The response code and suggestWhichBrokerId of a pull from ``offset`` that got
    ``result``, as PullMessageProcessor (4.9) decides them. Without slaveReadEnable consumers
    are sent to the master (0); with it, to the group's whichBrokerWhenConsumeSlowly when the
    pull lags beyond memory, else to the group's brokerId. The code comes from the store's
    status (a slave serves pulls), except that a slave moves no consumer's offset: it answers
    PULL_RETRY_IMMEDIATELY and suggests the group's brokerId (offsetCheckInSlave off)."""
    if not slave_read_enable:
        suggest = MASTER_ID
    elif result.suggest_pulling_from_slave:
        suggest = group.which_broker_when_consume_slowly
    else:
        suggest = group.broker_id
    code = pull_code(result.status, offset)
    if code == ResponseCode.PULL_OFFSET_MOVED and slave:
        return ResponseCode.PULL_RETRY_IMMEDIATELY, group.broker_id
    return code, suggest
