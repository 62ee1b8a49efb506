"""PULL_MESSAGE (11): parse, then the messaging service's checks and subscription (the one
the pull carries when its sys flag says so, else the group's heartbeat one) and its pull with
long polling (PullMessageProcessor); the found records travel as the response body, as
stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.consuming import PullQuery
from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import PullSysFlag
from pocketmq.protocol.names import EXPRESSION_TYPE_TAG, SubscriptionData
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler
from pocketmq.store import GetStatus

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class PullHandlers:
    def __init__(self, broker: Broker) -> None:
        self.config = broker.config
        self.messaging = broker.messaging

    def handlers(self) -> dict[int, RequestHandler]:
        return {RequestCode.PULL_MESSAGE: self.pull_message}

    def _hold_ms(self, sys_flag: int, suspend_ms: int) -> int:
        """Long polling (suspend flag) waits up to the client's timeout; short polling, when
        long polling is off, briefly; without the flag not at all."""
        if not sys_flag & PullSysFlag.SUSPEND:
            return 0
        if self.config.long_polling_enable:
            return suspend_ms
        return self.config.short_polling_time_mills

    async def pull_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group, topic, queue_id = fields.group(cmd), fields.topic(cmd), fields.queue_id(cmd)
        offset = fields.offset(cmd, "queueOffset")
        max_nums = fields.batch_size(cmd, default=32)
        sys_flag = fields.java_int(cmd, "sysFlag", 0)
        sub_version = fields.java_long(cmd, "subVersion", 0)
        commit = fields.offset(cmd, "commitOffset", -1, allow_none=True)
        hold_ms = self._hold_ms(sys_flag, fields.long_polling_ms(cmd))
        carried = None
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            carried = SubscriptionData(
                topic,
                cmd.ext_fields.get("subscription") or "",
                cmd.ext_fields.get("expressionType") or EXPRESSION_TYPE_TAG,
                sub_version,
            )
        sub = self.messaging.pull_subscription(group, topic, queue_id, carried, sub_version)
        query = PullQuery(group, topic, queue_id, offset, max_nums, sub.filter)
        if not sys_flag & PullSysFlag.COMMIT_OFFSET:
            commit = -1
        result = await self.messaging.pull(query, hold_ms, channel.closed, commit)
        code, suggest = self.messaging.pull_answer(group, result, query.offset)
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else result.status.value,
            ext_fields={
                "suggestWhichBrokerId": suggest,
                "nextBeginOffset": result.next_begin_offset,
                "minOffset": result.min_offset,
                "maxOffset": result.max_offset,
            },
            body=result.body if result.status is GetStatus.FOUND else b"",
        )
