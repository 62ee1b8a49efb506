"""A request code nobody serves is refused with REQUEST_CODE_NOT_SUPPORTED every time and
logged once per server (dispatcher), with the sender's address, version name and language."""

from __future__ import annotations

import asyncio
import logging

import pytest

from fake_transport import connected_channel
from pocketmq.protocol.codes import LanguageCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.protocol.versions import VERSION_NAMES, version_name
from pocketmq.remoting import Dispatcher


def _frame(
    code: int, opaque: int, *, version: int = 409, language: int = LanguageCode.JAVA
) -> bytes:
    cmd = RemotingCommand.request(code)
    cmd.opaque, cmd.version, cmd.language = opaque, version, language
    return cmd.encode()


def _lines(caplog: pytest.LogCaptureFixture, code: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if f"request code {code} is not supported" in r.message]


async def test_each_unknown_code_is_logged_once_per_dispatcher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    dispatcher = Dispatcher()
    channel, transport = connected_channel(dispatcher)
    channel.data_received(b"".join(_frame(9999, n) for n in range(50)) + _frame(8888, 51))
    await asyncio.sleep(0)  # answers after the first are written when the iteration ends
    answers = transport.commands()
    assert len(answers) == 51
    assert {a.code for a in answers} == {ResponseCode.REQUEST_CODE_NOT_SUPPORTED}
    assert answers[0].remark == " request type 9999 not supported"  # RocketMQ's remark
    (line,) = _lines(caplog, 9999)
    assert line.levelno == logging.WARNING
    assert f"first from {channel.peer}" in line.message
    assert "version V4_9_8 (409)" in line.message and "JAVA" in line.message
    assert len(_lines(caplog, 8888)) == 1
    # Another connection to the same server: still no second line.
    other, _ = connected_channel(dispatcher)
    other.data_received(_frame(9999, 1, version=10_000, language=77))
    assert len(_lines(caplog, 9999)) == 1
    # Another server (dispatcher) logs its own first time; odd versions and languages show.
    third, _ = connected_channel(Dispatcher())
    third.data_received(_frame(9999, 1, version=10_000, language=77))
    assert "HIGHER_VERSION (10000)" in _lines(caplog, 9999)[1].message
    assert "OTHER" in _lines(caplog, 9999)[1].message  # the decoder names unknown languages so


async def test_a_channel_without_handler_refuses_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    channel, transport = connected_channel(None)
    channel.data_received(_frame(7777, 1) + _frame(7777, 2))
    await asyncio.sleep(0)
    assert [c.code for c in transport.commands()] == [ResponseCode.REQUEST_CODE_NOT_SUPPORTED] * 2
    assert len(_lines(caplog, 7777)) == 1


def test_version_names_follow_mqversion() -> None:
    # MQVersion.Version's ordinals: 0 the first 3.0.0 snapshot, 15 V3_0_0_FINAL, then each
    # release as a SNAPSHOT and itself; 3.3.0 to 3.9.0 were never declared.
    assert version_name(0) == "V3_0_0_SNAPSHOT"
    assert version_name(15) == "V3_0_0_FINAL"
    assert (version_name(16), version_name(17)) == ("V3_0_1_SNAPSHOT", "V3_0_1")
    assert version_name(401) == "V4_9_4"
    assert version_name(409) == "V4_9_8"
    assert version_name(413) == "V5_0_0"
    assert "V3_3_0" not in VERSION_NAMES and "V3_3_1" in VERSION_NAMES
    assert VERSION_NAMES[-2:] == ("V5_9_9", "HIGHER_VERSION")
    assert version_name(99_999) == "HIGHER_VERSION"
    assert version_name(-1) == "unknown version -1"
