"""A handler that takes runs (Dispatcher.register with a run handler) is given a read's
consecutive requests of a run code together, in the order they came among the read's other
requests; each is answered as it would have been alone, whatever the run handler gives or
raises for it, and one-way requests of a run stay unanswered."""

from __future__ import annotations

import asyncio

import pytest

from fake_transport import connected_channel
from pocketmq.errors import RequestError
from pocketmq.pending import Pending
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import FLAG_ONEWAY, RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel
from pocketmq.remoting.channel import HandlerResult

RUN, OTHER_RUN, ALONE = 9101, 9102, 9103


class Recorder:
    """A dispatcher's handlers that note what they were given: ("one", opaque) for a request
    handled alone, ("run", opaques) for a run."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []
        self.run_result: str = "answers"

    def one(self, ch: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        self.seen.append(("one", cmd.opaque))
        return cmd.response(ResponseCode.SUCCESS, "alone")

    def run(
        self, ch: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]:
        self.seen.append(("run", [cmd.opaque for cmd in cmds]))
        if self.run_result == "raise":
            raise RuntimeError("the run broke")
        if self.run_result == "short":
            return []
        out: list[HandlerResult | Exception] = []
        for cmd in cmds:
            if cmd.opaque % 4 == 1:
                out.append(RequestError(ResponseCode.NO_PERMISSION, "refused in the run"))
            elif cmd.opaque % 4 == 2:
                later: Pending[RemotingCommand] = Pending()
                answer = cmd.response(ResponseCode.SUCCESS, "later")
                asyncio.get_running_loop().call_soon(lambda p=later, a=answer: p.then(a))
                out.append(later)
            else:
                out.append(cmd.response(ResponseCode.SUCCESS, "in the run"))
        return out


def dispatcher(recorder: Recorder) -> Dispatcher:
    d = Dispatcher()
    d.register(RUN, recorder.one, recorder.run)
    d.register(OTHER_RUN, recorder.one, recorder.run)
    d.register(ALONE, recorder.one)
    return d


def frame(code: int, opaque: int, *, oneway: bool = False) -> bytes:
    cmd = RemotingCommand.request(code, oneway=oneway)
    cmd.opaque = opaque
    return cmd.encode()


async def answered() -> None:
    for _ in range(3):  # the held answers, the Pendings settled by call_soon, the write
        await asyncio.sleep(0)


async def test_consecutive_requests_of_a_run_code_are_one_run_in_their_order() -> None:
    recorder = Recorder()
    channel, transport = connected_channel(dispatcher(recorder))
    channel.data_received(
        frame(RUN, 3) + frame(RUN, 6) + frame(ALONE, 5) + frame(RUN, 7) + frame(OTHER_RUN, 8)
        + frame(OTHER_RUN, 11) + frame(RUN, 12)
    )  # fmt: skip
    await answered()
    assert recorder.seen == [
        ("run", [3, 6]), ("one", 5), ("one", 7), ("run", [8, 11]), ("one", 12),
    ]  # fmt: skip
    assert [(c.opaque, c.remark) for c in transport.commands()] == [
        (3, "in the run"), (5, "alone"), (7, "alone"), (8, "in the run"), (11, "in the run"),
        (12, "alone"), (6, "later"),
    ]  # fmt: skip
    assert transport.writes == 1  # a read's answers, together


async def test_each_of_a_run_is_answered_as_alone_and_oneway_ones_not_at_all() -> None:
    recorder = Recorder()
    channel, transport = connected_channel(dispatcher(recorder))
    channel.data_received(
        frame(RUN, 1) + frame(RUN, 2) + frame(RUN, 3) + frame(RUN, 5, oneway=True)
        + frame(RUN, 6, oneway=True)
    )  # fmt: skip
    await answered()
    assert recorder.seen == [("run", [1, 2, 3, 5, 6])]
    assert [(c.opaque, c.code, c.remark) for c in transport.commands()] == [
        (1, ResponseCode.NO_PERMISSION, "refused in the run"),
        (3, ResponseCode.SUCCESS, "in the run"),
        (2, ResponseCode.SUCCESS, "later"),
    ]
    assert all(c.flag & FLAG_ONEWAY == 0 for c in transport.commands())


@pytest.mark.parametrize(
    ("broken", "remark"),
    [("raise", "RuntimeError: the run broke"),
     ("short", "RuntimeError: 0 results for a run of 2 requests")],
)  # fmt: skip
async def test_a_run_handler_that_raises_or_miscounts_fails_each_request(
    broken: str, remark: str
) -> None:
    recorder = Recorder()
    recorder.run_result = broken
    channel, transport = connected_channel(dispatcher(recorder))
    channel.data_received(frame(RUN, 3) + frame(RUN, 4) + frame(ALONE, 5))
    await answered()
    assert [(c.opaque, c.code, c.remark) for c in transport.commands()] == [
        (3, ResponseCode.SYSTEM_ERROR, remark),
        (4, ResponseCode.SYSTEM_ERROR, remark),
        (5, ResponseCode.SUCCESS, "alone"),
    ]
    assert not transport.closed  # the connection keeps serving


async def test_a_bad_frame_after_a_run_answers_the_run_then_closes() -> None:
    recorder = Recorder()
    channel, transport = connected_channel(dispatcher(recorder))
    bad = (8).to_bytes(4, "big") + (0).to_bytes(1, "big") + (10).to_bytes(3, "big") + b"{}{}"
    channel.data_received(frame(RUN, 3) + frame(RUN, 4) + bad)
    await answered()
    assert recorder.seen == [("run", [3, 4])]
    assert [c.opaque for c in transport.commands()] == [3, 4]  # written before the close
    assert transport.closed


async def test_a_handler_without_runs_handles_each_request() -> None:
    recorder = Recorder()
    d = Dispatcher()
    d.register(RUN, recorder.one)
    channel, transport = connected_channel(d)
    channel.data_received(frame(RUN, 3) + frame(RUN, 4))
    await answered()
    assert recorder.seen == [("one", 3), ("one", 4)]
    assert [c.opaque for c in transport.commands()] == [3, 4]
