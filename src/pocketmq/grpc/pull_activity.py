"""The pull consumer's RPCs, on the messaging service: PullMessage (long polling, a tag
filter rechecked by name or a SQL92 selector, ILLEGAL_OFFSET with the offset to resume from),
UpdateOffset, GetOffset and QueryOffset. Pull consumers keep their own position.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pocketmq.broker.consuming import PullQuery
from pocketmq.broker.stats import Protocol
from pocketmq.broker.status_map import pull_code
from pocketmq.grpc import convert
from pocketmq.grpc.activity import Activity, boundary
from pocketmq.grpc.calls import Context
from pocketmq.grpc.convert import GrpcRequestError, status
from pocketmq.grpc.messages import v2_message
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.fields import check_batch_size, check_group, check_offset
from pocketmq.protocol.record_codec import decode_message


class PullActivity(Activity):
    async def PullMessage(
        self, request: svc.PullMessageRequest, context: Context
    ) -> AsyncIterator[svc.PullMessageResponse]:
        """Server streaming: a status, the messages found, then the offset to pull from next
        (past messages the filter skipped). An offset outside the queue answers ILLEGAL_OFFSET
        with the offset to resume from, as a 4.x pull answers PULL_OFFSET_MOVED."""
        for response in await self._pull(request, context):
            yield response

    @boundary(lambda s: [svc.PullMessageResponse(status=s)])
    async def _pull(
        self, request: svc.PullMessageRequest, context: Context
    ) -> list[svc.PullMessageResponse]:
        group = convert.wrap(request.group)
        self._group(group)
        cfg, queue_id = self._queue(request.message_queue)
        topic = cfg.topic_name
        batch_size = check_batch_size(request.batch_size, "batch_size")
        offset = check_offset(request.offset)
        with convert.filter_refusals():
            sub = self.messaging.pull_subscription(
                group, topic, queue_id, convert.subscription_data(topic, request.filter_expression)
            )
        timeout = request.long_polling_timeout if request.HasField("long_polling_timeout") else None
        query = PullQuery(group, topic, queue_id, offset, batch_size, sub.filter)
        result = await self.messaging.pull(
            query, self._long_polling_ms(timeout, context), protocol=Protocol.GRPC
        )
        code = pull_code(result.status, offset)
        next_offset = result.next_begin_offset
        if code == ResponseCode.PULL_OFFSET_MOVED:
            moved = status(
                pb.ILLEGAL_OFFSET,
                f"offset {offset} is outside queue {queue_id} of {topic} "
                f"({result.min_offset}..{result.max_offset}), pull from {next_offset}",
            )
            return [
                svc.PullMessageResponse(status=moved),
                svc.PullMessageResponse(next_offset=next_offset),
            ]
        responses = [svc.PullMessageResponse(status=status())]
        for raw in result.messages:
            msg = decode_message(raw)
            # The store matched tag hashes only; a colliding tag is skipped here.
            if sub.tags is None or msg.tags in sub.tags:
                message = v2_message(msg, queue_id=queue_id, queue_offset=msg.queue_offset)
                message.topic.CopyFrom(request.message_queue.topic)  # the client's namespace
                responses.append(svc.PullMessageResponse(message=message))
        responses.append(svc.PullMessageResponse(next_offset=next_offset))
        return responses

    @boundary(lambda s: svc.UpdateOffsetResponse(status=s))
    async def UpdateOffset(
        self, request: svc.UpdateOffsetRequest, context: Context
    ) -> svc.UpdateOffsetResponse:
        """Commit the offset a group consumes next in a queue (persisted with the 4.x ones)."""
        group = convert.wrap(request.group)
        self._group(group)
        cfg, queue_id = self._queue(request.message_queue)
        offset = check_offset(request.offset)
        self.messaging.commit_offset(group, cfg.topic_name, queue_id, offset)
        return svc.UpdateOffsetResponse(status=status())

    @boundary(lambda s: svc.GetOffsetResponse(status=s))
    async def GetOffset(
        self, request: svc.GetOffsetRequest, context: Context
    ) -> svc.GetOffsetResponse:
        """A group's committed offset in a queue. Without one the answer is OFFSET_NOT_FOUND,
        unlike a 4.x query (which answers 0 for a queue that never lost a message): a pull
        consumer then starts where its own policy says, by QueryOffset."""
        group = check_group(convert.wrap(request.group))
        cfg, queue_id = self._queue(request.message_queue)
        offset = self.messaging.committed_offset(group, cfg.topic_name, queue_id)
        if offset < 0:
            return svc.GetOffsetResponse(
                status=status(
                    pb.OFFSET_NOT_FOUND,
                    f"group {group} has no offset in queue {queue_id} of {cfg.topic_name}",
                )
            )
        return svc.GetOffsetResponse(status=status(), offset=offset)

    @boundary(lambda s: svc.QueryOffsetResponse(status=s))
    async def QueryOffset(
        self, request: svc.QueryOffsetRequest, context: Context
    ) -> svc.QueryOffsetResponse:
        """A queue's first offset still stored (BEGINNING), the offset its next message gets
        (END), or the first offset stored at or after a time (TIMESTAMP; END when none is)."""
        cfg, queue_id = self._queue(request.message_queue)
        topic = cfg.topic_name
        policy = request.query_offset_policy
        if policy == pb.BEGINNING:
            offset = self.messaging.min_offset(topic, queue_id)
        elif policy == pb.END:
            offset = self.messaging.max_offset(topic, queue_id)
        elif policy == pb.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise GrpcRequestError(pb.BAD_REQUEST, "a TIMESTAMP query needs a timestamp")
            at_ms = convert.timestamp_ms(request.timestamp)
            offset = self.messaging.offset_by_time(topic, queue_id, at_ms)
        else:
            raise GrpcRequestError(pb.BAD_REQUEST, f"query offset policy {policy} is unknown")
        return svc.QueryOffsetResponse(status=status(), offset=offset)

    # ------------------------------------------------------------------ consumption (POP)
