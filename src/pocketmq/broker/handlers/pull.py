"""PULL_MESSAGE (11): parse, then the messaging service's pull with long polling
(PullMessageProcessor); the found records travel as the response body, as stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.messaging import PullQuery
from pocketmq.broker.status_map import pull_code
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_int, get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler
from pocketmq.store import GetStatus, TagFilter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2


class PullHandlers:
    def __init__(self, broker: Broker) -> None:
        self.config = broker.config
        self.messaging = broker.messaging

    def handlers(self) -> dict[int, RequestHandler]:
        return {RequestCode.PULL_MESSAGE: self.pull_message}

    def _hold_ms(self, sys_flag: int, suspend_ms: int) -> int:
        """Long polling (suspend flag) waits up to the client's timeout; short polling, when
        long polling is off, briefly; without the flag not at all."""
        if not sys_flag & PULL_FLAG_SUSPEND:
            return 0
        if self.config.long_polling_enable:
            return suspend_ms
        return self.config.short_polling_time_mills

    async def pull_message(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        query = PullQuery(
            group=get_str(cmd, "consumerGroup"),
            topic=get_str(cmd, "topic"),
            queue_id=get_int(cmd, "queueId"),
            offset=get_int(cmd, "queueOffset"),
            max_nums=get_int(cmd, "maxMsgNums", 32),
            filter=TagFilter.parse(cmd.ext_fields.get("subscription")),
        )
        sys_flag = get_int(cmd, "sysFlag", 0)
        self.messaging.readable_queue(query.topic, query.queue_id)
        if sys_flag & PULL_FLAG_COMMIT_OFFSET and self.config.broker_id == 0:
            commit = get_int(cmd, "commitOffset", -1)
            if commit >= 0:
                self.messaging.commit_offset(query.group, query.topic, query.queue_id, commit)
        hold_ms = self._hold_ms(sys_flag, get_int(cmd, "suspendTimeoutMillis", 0))
        result = await self.messaging.pull(query, hold_ms, channel.closed)
        code = pull_code(result.status, query.offset)
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else result.status.value,
            ext_fields={
                "suggestWhichBrokerId": 0,
                "nextBeginOffset": result.next_begin_offset,
                "minOffset": result.min_offset,
                "maxOffset": result.max_offset,
            },
            body=b"".join(result.messages) if result.status is GetStatus.FOUND else b"",
        )
