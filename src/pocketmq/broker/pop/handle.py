"""The receipt handle a popped message is acked, changed or forwarded by, as RocketMQ's
ExtraInfoUtil writes it: eight fields separated by single spaces.

    startOffset   the first queue offset of the pop that delivered it
    popTime       epoch ms of that pop (or of the change of invisible time that replaced it)
    invisibleTime ms the message stays invisible from popTime
    reviveQid     always 0: one revive queue
    topicType     "0" popped from the topic, "1" from the group's POP retry topic
    brokerName
    queueId
    queueOffset   the message's offset in that queue

No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.errors import RequestError
from pocketmq.protocol.codes import ResponseCode

_NORMAL, _RETRY = "0", "1"
_FIELDS = 8


class InvalidReceiptHandle(RequestError):
    """A receipt handle that is malformed, stale (its message was acked, changed or redelivered
    since) or expired."""

    def __init__(self, remark: str) -> None:
        super().__init__(ResponseCode.NO_MESSAGE, remark)


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    start_offset: int
    pop_time: int
    invisible_ms: int
    retry: bool  # popped from the group's POP retry topic
    broker_name: str
    queue_id: int
    queue_offset: int

    def encode(self) -> str:
        return " ".join(
            (
                str(self.start_offset), str(self.pop_time), str(self.invisible_ms), "0",
                _RETRY if self.retry else _NORMAL, self.broker_name, str(self.queue_id),
                str(self.queue_offset),
            )
        )  # fmt: skip

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Raises:
        InvalidReceiptHandle: not eight fields, an unknown topic type or a non-number."""
        parts = text.split(" ")
        if len(parts) != _FIELDS or parts[4] not in (_NORMAL, _RETRY):
            raise InvalidReceiptHandle(f"receipt handle {text!r} is malformed")
        try:
            return cls(
                int(parts[0]), int(parts[1]), int(parts[2]), parts[4] == _RETRY, parts[5],
                int(parts[6]), int(parts[7]),
            )  # fmt: skip
        except ValueError:
            raise InvalidReceiptHandle(f"receipt handle {text!r} is malformed") from None

    @property
    def deadline(self) -> int:
        """Epoch ms at which the message becomes visible again."""
        return self.pop_time + self.invisible_ms
