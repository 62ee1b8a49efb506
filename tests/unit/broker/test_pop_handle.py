"""Receipt handles: ExtraInfoUtil's layout both ways, and every malformed handle refused."""

from __future__ import annotations

import pytest

from pocketmq.broker.pop import InvalidReceiptHandle, ReceiptHandle
from pocketmq.protocol.codes import ResponseCode


@pytest.mark.parametrize(
    ("handle", "text"),
    [
        (ReceiptHandle(5, 1_700_000_000_000, 30_000, False, "broker-a", 1, 7),
         "5 1700000000000 30000 0 0 broker-a 1 7"),
        (ReceiptHandle(0, 1, 2, True, "b", 0, 0), "0 1 2 0 1 b 0 0"),
    ],
)  # fmt: skip
def test_round_trip(handle: ReceiptHandle, text: str) -> None:
    assert handle.encode() == text
    assert ReceiptHandle.decode(text) == handle


def test_deadline() -> None:
    assert ReceiptHandle(5, 1_000, 300, False, "b", 1, 7).deadline == 1_300


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1 2 3",
        "1 2 3 0 0 b 0 0 9",  # nine fields
        "1  2 3 0 0 b 0 0",  # a double space
        "a b c d 0 broker-a 0 0",
        "1 2 3 0 9 broker-a 0 0",  # no such topic type
        "1 2 3 0 0 broker-a 0 x",
    ],
)
def test_malformed(text: str) -> None:
    with pytest.raises(InvalidReceiptHandle, match="malformed") as raised:
        ReceiptHandle.decode(text)
    assert raised.value.code == ResponseCode.NO_MESSAGE
