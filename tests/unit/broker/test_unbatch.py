"""The broker's unbatching of a SEND_BATCH_MESSAGE body (handlers/send.py's unbatch): each
message is the header's, with its own body, flag and properties over the header's; a delay
level on the batch or on one of its messages refuses the batch."""

from __future__ import annotations

import pytest

from pocketmq.broker.handlers.send import unbatch
from pocketmq.errors import RequestError
from pocketmq.protocol.batch import encode_batch_body
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.message import Message, MessageConst, MessageExt

DELAY = MessageConst.DELAY_TIME_LEVEL


def _base(body: bytes, **props: str) -> MessageExt:
    return MessageExt(
        topic="T", body=body, queue_id=2, properties=dict(props), sys_flag=0,
        born_timestamp=7, born_host=("10.0.0.2", 5), reconsume_times=1,
    )  # fmt: skip


def test_each_message_is_the_headers_with_its_own_fields() -> None:
    body = encode_batch_body(
        [Message("T", b"one", 4, {"A": "x", "K": "k1"}), Message("T", b"two", 0, {})]
    )
    msgs = unbatch(_base(body, A="base", WAIT="true"))
    assert [(m.body, m.flag, m.properties) for m in msgs] == [
        (b"one", 4, {"A": "x", "WAIT": "true", "K": "k1"}),
        (b"two", 0, {"A": "base", "WAIT": "true"}),
    ]
    for m in msgs:
        assert (m.topic, m.queue_id, m.born_timestamp, m.born_host, m.reconsume_times) == (
            "T", 2, 7, ("10.0.0.2", 5), 1,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("base_delay", "entry_delay", "refused"),
    [(None, None, False), ("0", None, False), ("", "0", False), (None, "3", True),
     ("2", None, True), ("2", "0", True)],
)  # fmt: skip
def test_a_delay_level_refuses_the_batch(
    base_delay: str | None, entry_delay: str | None, refused: bool
) -> None:
    entry = {DELAY: entry_delay} if entry_delay is not None else {}
    base = {DELAY: base_delay} if base_delay is not None else {}
    body = encode_batch_body([Message("T", b"a"), Message("T", b"b", 0, entry)])
    if not refused:
        assert len(unbatch(_base(body, **base))) == 2
        return
    with pytest.raises(RequestError) as err:
        unbatch(_base(body, **base))
    assert err.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "TimeDelayLevel" in str(err.value)


@pytest.mark.parametrize("body", [b"", b"\x00\x00\x00\x05junk"])
def test_an_empty_or_undecodable_batch_is_illegal(body: bytes) -> None:
    with pytest.raises(RequestError) as err:
        unbatch(_base(body))
    assert err.value.code == ResponseCode.MESSAGE_ILLEGAL
