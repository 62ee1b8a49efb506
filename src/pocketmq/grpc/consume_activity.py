"""The 5.x consumers' RPCs on the broker's POP service: QueryAssignment, ReceiveMessage,
AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue; push consumers'
handles are renewed while they are connected (``receipts``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pocketmq.broker.pop import InvalidReceiptHandle, PopRequest
from pocketmq.errors import RequestError
from pocketmq.grpc import convert
from pocketmq.grpc.activity import Activity, boundary, log
from pocketmq.grpc.calls import Context, client_id
from pocketmq.grpc.convert import status
from pocketmq.grpc.messages import set_ms, v2_message
from pocketmq.grpc.v2 import definition_pb2 as pb
from pocketmq.grpc.v2 import service_pb2 as svc
from pocketmq.protocol.fields import check_batch_size, check_invisible_ms
from pocketmq.protocol.names import is_readable, is_writeable


class ConsumeActivity(Activity):
    @boundary(lambda s: svc.QueryAssignmentResponse(status=s))
    async def QueryAssignment(
        self, request: svc.QueryAssignmentRequest, context: Context
    ) -> svc.QueryAssignmentResponse:
        """What a push consumer receives from: the whole broker (queue id -1, the broker pops
        from every queue) for concurrent groups, each queue for FIFO groups, as the proxy
        answers."""
        topic = convert.check_topic(request.topic)
        policy = self._group_policy(convert.wrap(request.group))
        cfg = self.messaging.topic(topic)
        if not is_readable(cfg.perm) or cfg.read_queue_nums <= 0:
            return svc.QueryAssignmentResponse(status=status(pb.FORBIDDEN, "no readable queue"))
        queue_ids = range(cfg.read_queue_nums) if policy.fifo else (-1,)
        broker = self._broker_pb()
        accepts = convert.accept_message_types(cfg)
        return svc.QueryAssignmentResponse(
            status=status(),
            assignments=[
                pb.Assignment(
                    message_queue=pb.MessageQueue(
                        topic=request.topic, id=queue_id,
                        permission=pb.READ_WRITE if is_writeable(cfg.perm) else pb.READ,
                        broker=broker, accept_message_types=accepts,
                    )
                )
                for queue_id in queue_ids
            ],
        )  # fmt: skip

    def _pop_request(
        self, request: svc.ReceiveMessageRequest, context: Context
    ) -> tuple[PopRequest, int]:
        """The broker's pop of a ReceiveMessage, and how long it may wait (ms).

        Raises:
            GrpcRequestError: a bad topic, group, batch size, filter or invisible time.
        """
        topic = convert.check_topic(request.message_queue.topic)
        group = convert.wrap(request.group)
        policy = self._group_policy(group)
        self.messaging.consuming_group(group)
        check_batch_size(request.batch_size, "batch_size")
        config = self.broker.config
        if request.auto_renew:
            invisible_ms = config.default_invisible_time_mills
        else:
            invisible_ms = check_invisible_ms(
                convert.duration_ms(request.invisible_duration),
                config.min_invisible_time_mills_for_recv,
                config.max_invisible_time_mills,
                "invisible_duration",
            )
        with convert.filter_refusals():
            sub = self.messaging.subscription(
                convert.subscription_data(topic, request.filter_expression)
            )
        poll_ms = self._long_polling_ms(
            request.long_polling_timeout if request.HasField("long_polling_timeout") else None,
            context,
        )
        pop = PopRequest(
            group=group, topic=topic, max_nums=request.batch_size, invisible_ms=invisible_ms,
            tags=sub.filter, tag_set=sub.tags, fifo=policy.fifo,
            max_attempts=policy.max_delivery_attempts,
        )  # fmt: skip
        return pop, poll_ms

    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        """Server streaming, as the proxy writes it: a status, one response per message, then
        the delivery timestamp; or a lone MESSAGE_NOT_FOUND after the long poll."""
        try:
            pop, poll_ms = self._pop_request(request, context)
            popped = await self.pop.pop(pop, poll_ms)
        except RequestError as exc:
            yield svc.ReceiveMessageResponse(status=convert.status_of_error(exc))
            return
        except Exception as exc:  # the call's task boundary
            log.exception("gRPC ReceiveMessage failed")
            yield svc.ReceiveMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, type(exc).__name__)
            )
            return
        if not popped:
            yield svc.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield svc.ReceiveMessageResponse(status=status())
        renewing_for = client_id(context) if request.auto_renew else ""
        for p in popped:
            message = v2_message(
                p.msg, topic=p.topic, queue_id=p.msg.queue_id, queue_offset=p.msg.queue_offset
            )
            message.topic.CopyFrom(request.message_queue.topic)  # the client's namespace
            sp = message.system_properties
            sp.receipt_handle = p.handle
            sp.delivery_attempt = p.attempt
            set_ms(sp.invisible_duration, p.invisible_ms)
            if renewing_for:
                self.renewer.track(renewing_for, pop.group, sp.message_id, p.topic, p.handle)
            yield svc.ReceiveMessageResponse(message=message)
        yield svc.ReceiveMessageResponse(delivery_timestamp=convert.timestamp_now())

    @boundary(lambda s: svc.AckMessageResponse(status=s))
    async def AckMessage(
        self, request: svc.AckMessageRequest, context: Context
    ) -> svc.AckMessageResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        if not request.entries:
            return svc.AckMessageResponse(status=status(pb.BAD_REQUEST, "no entry to ack"))
        # Results are filled where they are: built apart, each would be copied in.
        response = svc.AckMessageResponse()
        results = response.entries
        for entry in request.entries:
            result = results.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
            try:
                handle = await self._settle(context, group, entry.message_id, entry.receipt_handle)
                await self.pop.ack(group, topic, handle)
            except RequestError as exc:
                result.status.CopyFrom(self._consume_status(exc))
            else:
                convert.set_ok(result.status)
        if len({r.status.code for r in results}) == 1:
            response.status.CopyFrom(results[0].status)
        else:
            mixed = status(pb.MULTIPLE_RESULTS, "the entries had different outcomes")
            response.status.CopyFrom(mixed)
        return response

    def _group_and_topic(self, group: pb.Resource, topic: pb.Resource) -> tuple[str, str]:
        """The broker's names of the group and topic an ack, change or forward names.

        Raises:
            GrpcRequestError: an illegal topic, or a blank or unknown group.
        """
        topic_name = convert.check_topic(topic)
        group_name = convert.wrap(group)
        self._group(group_name)
        return group_name, topic_name

    async def _settle(self, context: Context, group: str, message_id: str, handle: str) -> str:
        """The handle to act on for a client's ack, nack or forward (``ReceiptRenewer.settle``);
        the client's own when nothing is being renewed, without reading the call's metadata."""
        if not self.renewer.renewing:
            return handle
        return await self.renewer.settle(client_id(context), group, message_id, handle)

    @staticmethod
    def _consume_status(exc: RequestError) -> pb.Status:
        if isinstance(exc, InvalidReceiptHandle):
            return status(pb.INVALID_RECEIPT_HANDLE, exc.remark)
        return convert.status_of_error(exc)

    @boundary(lambda s: svc.ChangeInvisibleDurationResponse(status=s))
    async def ChangeInvisibleDuration(
        self, request: svc.ChangeInvisibleDurationRequest, context: Context
    ) -> svc.ChangeInvisibleDurationResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        invisible_ms = check_invisible_ms(
            convert.duration_ms(request.invisible_duration),
            0,
            self.broker.config.max_invisible_time_mills,
            "invisible_duration",
        )
        try:
            handle = await self._settle(context, group, request.message_id, request.receipt_handle)
            new = await self.pop.change_invisible(group, topic, handle, invisible_ms)
        except RequestError as exc:
            return svc.ChangeInvisibleDurationResponse(status=self._consume_status(exc))
        return svc.ChangeInvisibleDurationResponse(status=status(), receipt_handle=new)

    @boundary(lambda s: svc.ForwardMessageToDeadLetterQueueResponse(status=s))
    async def ForwardMessageToDeadLetterQueue(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        group, topic = self._group_and_topic(request.group, request.topic)
        try:
            handle = await self._settle(context, group, request.message_id, request.receipt_handle)
            await self.pop.forward_to_dead_letter(group, topic, handle)
        except RequestError as exc:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=self._consume_status(exc))
        return svc.ForwardMessageToDeadLetterQueueResponse(status=status())
