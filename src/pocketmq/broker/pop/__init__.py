"""RocketMQ 5's POP consumption, which the 5.x gRPC endpoint serves: ``service`` (pop, ack,
change of invisible time, forward to the DLQ, replay at load), ``revive`` (unacked messages
back at their deadline), ``inflight`` (what is in flight), ``records`` (the revive log) and
``handle`` (receipt handles)."""

from pocketmq.broker.pop.handle import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.service import Popped, PopRequest, PopService

__all__ = ["InvalidReceiptHandle", "PopRequest", "PopService", "Popped", "ReceiptHandle"]
