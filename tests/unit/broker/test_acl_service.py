"""The broker's ACL service: plain_acl.yml read, reloaded on change (a bad edit keeps the last
good rules), and the gate in front of the remoting dispatcher."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.acl import AclService
from pocketmq.errors import ConfigError
from pocketmq.protocol.acl_sign import SessionCredentials, sign_request
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher
from pocketmq.remoting.channel import HandlerResult, RemotingChannel, TakesRuns

ACCOUNT = """
accounts:
  - accessKey: RocketMQ
    secretKey: {secret}
    defaultTopicPerm: PUB
"""


def write(path: Path, text: str, *, mtime_ns: int) -> None:
    path.write_text(text)
    # Pinned times: a rewrite within the file system's timestamp granularity is still seen.
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_reload_takes_effect_and_a_bad_edit_keeps_the_last_good_rules(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain_acl.yml"
    write(path, ACCOUNT.format(secret="first-secret"), mtime_ns=1_000)
    acl = AclService(path)
    acl.load()
    assert acl.rules.accounts["RocketMQ"].secret_key == "first-secret"
    assert acl.poll() is False  # unchanged

    write(path, ACCOUNT.format(secret="second-secret"), mtime_ns=2_000)
    assert acl.poll() is True
    assert acl.rules.accounts["RocketMQ"].secret_key == "second-secret"

    with caplog.at_level(logging.ERROR, logger="pocketmq.broker.acl.service"):
        write(path, "accounts: [ {accessKey: x", mtime_ns=3_000)
        assert acl.poll() is False
    assert acl.rules.accounts["RocketMQ"].secret_key == "second-secret"
    assert any(r.levelno == logging.ERROR and "not YAML" in r.message for r in caplog.records)
    assert acl.poll() is False  # the same bad file is not read again

    path.unlink()
    assert acl.poll() is True
    assert acl.rules.accounts == {}


def test_a_bad_file_at_start_stops_the_start_and_a_missing_one_refuses_all(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts:\n  - accessKey: short\n    secretKey: short\n")
    with pytest.raises(ConfigError, match="longer than 6"):
        AclService(bad).load()
    missing = AclService(tmp_path / "absent.yml")
    missing.load()
    assert missing.rules.accounts == {}


class FakeChannel:
    peer = "127.0.0.1:40000"


def loaded(tmp_path: Path) -> AclService:
    """An AclService with ACCOUNT's rules (secret 12345678) loaded."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACCOUNT.format(secret="12345678"))
    acl = AclService(path)
    acl.load()
    return acl


def test_the_gate_checks_each_request_of_a_run_and_hands_the_allowed_on_as_one(
    tmp_path: Path,
) -> None:
    acl = loaded(tmp_path)
    runs: list[list[int]] = []

    def run(channel: RemotingChannel, cmds: list[RemotingCommand]) -> list[Any]:
        runs.append([cmd.opaque for cmd in cmds])
        return [cmd.response(ResponseCode.SUCCESS) for cmd in cmds]

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, lambda ch, cmd: None, run)
    gate = acl.gate(dispatcher)
    assert isinstance(gate, TakesRuns) and gate.run_codes == {RequestCode.SEND_MESSAGE}
    cmds = []
    for opaque, secret in ((1, "12345678"), (2, "wrong"), (3, "12345678"), (4, "12345678")):
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"})
        cmd.opaque = opaque
        sign_request(cmd, SessionCredentials("RocketMQ", secret))
        cmds.append(cmd)
    channel: Any = FakeChannel()
    answers = gate.handle_run(channel, cmds)
    assert runs == [[1, 3, 4]]  # the refused one never reaches a handler
    assert [a.code for a in answers if isinstance(a, RemotingCommand)] == [
        ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR, ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
    ]  # fmt: skip


def test_the_gate_answers_a_refusal_as_rocketmq_and_never_calls_the_handler(
    tmp_path: Path,
) -> None:
    acl = loaded(tmp_path)
    reached: list[int] = []

    def handler(channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        reached.append(cmd.code)
        return cmd.response(ResponseCode.SUCCESS)

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, handler)
    gate = acl.gate(dispatcher)
    channel: Any = FakeChannel()
    ok = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"})
    sign_request(ok, SessionCredentials("RocketMQ", "12345678"))
    answer = gate(channel, ok)
    assert isinstance(answer, RemotingCommand) and answer.code == ResponseCode.SUCCESS

    wrong = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"})
    sign_request(wrong, SessionCredentials("RocketMQ", "wrong-secret"))
    answer = gate(channel, wrong)
    assert isinstance(answer, RemotingCommand)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == (
        "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=RocketMQ"
    )
    assert reached == [RequestCode.SEND_MESSAGE]
