"""END_TRANSACTION (37): a producer commits or rolls back a half message, after its local
transaction or when the broker checked it (EndTransactionProcessor). The transaction service
decides; this edge parses EndTransactionRequestHeader.

Clients send it one-way; the channel writes no response to a one-way request. Sent as an
ordinary request it is answered: SUCCESS once the transaction is resolved (a commit is then
consumable), and SUCCESS with a remark for "unknown", which leaves the half to the check
(RocketMQ answers nothing there, which a caller waiting for a response could only time out on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.transaction import EndTransaction
from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_str
from pocketmq.protocol.message import SysFlag
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def end_of(cmd: RemotingCommand) -> EndTransaction:
    """The EndTransactionRequestHeader of ``cmd``, each field validated.

    Raises:
        RequestError: SYSTEM_ERROR for a missing or malformed field (RocketMQ's header
            decoding fails), INVALID_PARAMETER for a bad group, topic or offset.
    """
    if "topic" in cmd.ext_fields:  # RocketMQ 5's clients name it, for ACLs
        fields.topic(cmd)
    return EndTransaction(
        producer_group=fields.group(cmd, "producerGroup"),
        commit_log_offset=fields.offset(cmd, "commitLogOffset"),
        queue_offset=fields.offset(cmd, "tranStateTableOffset"),
        resolution=fields.transaction_resolution(cmd),
        from_check=get_bool(cmd, "fromTransactionCheck"),
        msg_id=get_str(cmd, "msgId"),
    )


class TransactionHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, RequestHandler]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    async def end_transaction(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        end = end_of(cmd)
        await self.broker.messaging.end_transaction(end)
        if end.resolution == SysFlag.TRANSACTION_NOT_TYPE:
            return cmd.response(
                ResponseCode.SUCCESS,
                "transaction state unknown: the half message stays open until checked",
            )
        return cmd.response(ResponseCode.SUCCESS)
