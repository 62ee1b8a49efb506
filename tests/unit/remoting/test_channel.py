"""RemotingChannel answers requests, never one-way ones: whatever the handler returns or
raises, and for codes nobody serves, a one-way request gets no frame back."""

from __future__ import annotations

import asyncio

import pytest

from fake_transport import connected_channel
from pocketmq.errors import RequestError
from pocketmq.pending import Pending
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import FLAG_ONEWAY, RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel

OK, REFUSE, RAISE, ASYNC_OK, ASYNC_RAISE, UNKNOWN = 9001, 9002, 9003, 9004, 9005, 9099
LATER_OK, LATER_RAISE = 9006, 9007


def _dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(OK, lambda ch, cmd: cmd.response(ResponseCode.SUCCESS, "ok"))
    d.register(REFUSE, lambda ch, cmd: cmd.response(ResponseCode.NO_PERMISSION, "no"))

    def raises(ch: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("boom")

    async def async_ok(ch: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        return cmd.response(ResponseCode.SUCCESS, "later")

    async def async_raises(ch: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        raise RequestError(ResponseCode.SYSTEM_ERROR, "refused later")

    def settled_later(outcome: RemotingCommand | Exception) -> Pending[RemotingCommand]:
        later: Pending[RemotingCommand] = Pending()
        asyncio.get_running_loop().call_soon(lambda: later.then(outcome))
        return later

    d.register(RAISE, raises)
    d.register(ASYNC_OK, async_ok)
    d.register(ASYNC_RAISE, async_raises)
    d.register(LATER_OK, lambda ch, cmd: settled_later(cmd.response(ResponseCode.SUCCESS)))
    d.register(
        LATER_RAISE,
        lambda ch, cmd: settled_later(RequestError(ResponseCode.NO_PERMISSION, "later")),
    )
    return d


async def answered(channel: RemotingChannel) -> None:
    """Until the requests read so far are answered: their tasks done, and the loop turn in
    which the answers of a read of several requests are written."""
    await asyncio.gather(*channel._tasks)
    await asyncio.sleep(0)


def _frame(code: int, opaque: int, *, oneway: bool) -> bytes:
    cmd = RemotingCommand.request(code)
    cmd.opaque = opaque
    if oneway:
        cmd.flag |= FLAG_ONEWAY
    return cmd.encode()


@pytest.mark.parametrize(
    "code", [OK, REFUSE, RAISE, ASYNC_OK, ASYNC_RAISE, LATER_OK, LATER_RAISE, UNKNOWN]
)
async def test_a_oneway_request_gets_no_frame_back_a_normal_one_does(code: int) -> None:
    channel, transport = connected_channel(_dispatcher())
    channel.data_received(_frame(code, 7, oneway=True) + _frame(OK, 8, oneway=False))
    await answered(channel)
    sent = transport.commands()
    assert [(c.opaque, c.code, c.is_response) for c in sent] == [(8, ResponseCode.SUCCESS, True)]


@pytest.mark.parametrize(
    ("code", "answer"),
    [
        (REFUSE, ResponseCode.NO_PERMISSION),
        (RAISE, ResponseCode.SYSTEM_ERROR),
        (ASYNC_OK, ResponseCode.SUCCESS),
        (ASYNC_RAISE, ResponseCode.SYSTEM_ERROR),
        (LATER_OK, ResponseCode.SUCCESS),
        (LATER_RAISE, ResponseCode.NO_PERMISSION),
        (UNKNOWN, ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
    ],
)
async def test_a_normal_request_is_answered_with_its_opaque(code: int, answer: int) -> None:
    channel, transport = connected_channel(_dispatcher())
    channel.data_received(_frame(code, 5, oneway=False))
    await answered(channel)
    assert [(c.opaque, c.code) for c in transport.commands()] == [(5, answer)]


async def test_a_channel_without_handler_answers_only_normal_requests() -> None:
    channel, transport = connected_channel()
    channel.data_received(_frame(OK, 1, oneway=True) + _frame(OK, 2, oneway=False))
    await answered(channel)
    assert [(c.opaque, c.code) for c in transport.commands()] == [
        (2, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    ]


async def test_frames_of_one_iteration_are_written_together_and_a_lone_one_at_once() -> None:
    channel, transport = connected_channel(_dispatcher())
    channel.data_received(_frame(OK, 1, oneway=False))
    assert transport.writes == 1  # the first answer of an iteration waits for nothing
    channel.data_received(b"".join(_frame(OK, opaque, oneway=False) for opaque in range(2, 7)))
    assert transport.writes == 1  # held until the iteration ends
    await asyncio.sleep(0)
    assert transport.writes == 2
    assert [cmd.opaque for cmd in transport.commands()] == [1, 2, 3, 4, 5, 6]

    # A new iteration, and a read of several requests: their answers are held for one write
    # (with those of their tasks, had they any). A request is held like an answer, after it.
    channel.data_received(b"".join(_frame(OK, opaque, oneway=False) for opaque in (7, 8)))
    assert transport.writes == 2
    channel.invoke_oneway(RemotingCommand.request(UNKNOWN, {}))
    assert transport.writes == 2
    await asyncio.sleep(0)
    assert transport.writes == 3
    assert [cmd.is_response for cmd in transport.commands()][-3:] == [True, True, False]

    # A read of one whole request and part of the next: its answer at once.
    second = _frame(OK, 12, oneway=False)
    channel.data_received(_frame(OK, 11, oneway=False) + second[:5])
    assert transport.writes == 4
    channel.data_received(second[5:])  # the same iteration: held
    assert transport.writes == 4
    await asyncio.sleep(0)
    assert transport.writes == 5
    assert [cmd.opaque for cmd in transport.commands()][-2:] == [11, 12]

    channel.invoke_oneway(RemotingCommand.request(UNKNOWN, {}))  # a lone request: at once
    assert transport.writes == 6
    channel.data_received(_frame(OK, 9, oneway=False))  # the same iteration: held
    channel.data_received(_frame(OK, 10, oneway=False))
    assert transport.writes == 6
    channel.close()  # what is held still goes out, before the transport closes
    assert transport.writes == 7 and transport.closed
    assert [cmd.opaque for cmd in transport.commands() if cmd.is_response][-2:] == [9, 10]
