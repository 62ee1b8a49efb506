"""The broker's ACL: the rules of plain_acl.yml, reloaded when the file changes, and the check
in front of the remoting dispatcher.

The file is read at start (a missing file has no rules: every request is refused; a bad one
stops the start with a ConfigError), then looked at every ``watch_interval_ms`` (RocketMQ's
AclFileWatchService: 5 s): when its modification time, size or inode changed it is read again.
A bad edit keeps the last good rules and is logged at ERROR until it is fixed. Reads and the
stat run on a worker thread, never on the event loop.

Remoting refusals are answered as RocketMQ's broker answers an AclException thrown by its RPC
hook (NettyRemotingAbstract.processRequestCommand): SYSTEM_ERROR, the remark being the
exception's string; one-way requests get no answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import KeysView
from pathlib import Path

import yaml

from pocketmq.broker.acl.access import AccessRequest, AclDenied, check
from pocketmq.broker.acl.remoting import remoting_access
from pocketmq.broker.acl.rules import AclRules, rules_from_document
from pocketmq.errors import ConfigError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher
from pocketmq.remoting.channel import HandlerResult, RemotingChannel
from pocketmq.tasks import cancel_and_wait, run_when_due

log = logging.getLogger(__name__)

# How RocketMQ's remark names the refusal (AclException.toString()).
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
Stamp = tuple[int, int, int]


def read_rules(path: Path) -> tuple[Stamp | None, AclRules]:
    """The file's stamp (mtime, size, inode) and its rules; a missing file: None, no rules.

    Raises:
        ConfigError: the file is not valid YAML or breaks plain_acl.yml's format.
    """
    try:
        stat = path.stat()
        text = path.read_bytes()
    except FileNotFoundError:
        return None, AclRules()
    except OSError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {exc}") from exc
    try:
        rules = rules_from_document(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino), rules


def host_of(peer: str) -> str:
    """The IP address of a ``host:port`` peer (``[v6]:port`` too)."""
    return peer.rpartition(":")[0].strip("[]") if ":" in peer else peer


class AclService:
    def __init__(self, path: Path, *, watch_interval_ms: int = 5_000) -> None:
        self.path = path
        self.watch_interval_ms = watch_interval_ms
        self.rules = AclRules()
        self._stamp: Stamp | None = None
        self._task: asyncio.Task[None] | None = None

    def load(self) -> None:
        """Read the file now.

        Raises:
            ConfigError: see read_rules.
        """
        self._stamp, self.rules = read_rules(self.path)
        if self._stamp is None:
            log.warning("ACL is on and %s does not exist: every request is refused", self.path)
        else:
            log.info("ACL rules loaded from %s: %d accounts", self.path, len(self.rules.accounts))

    def poll(self) -> bool:
        """Reload the file if it changed since the last look; True when new rules are in force.
        A bad file keeps the rules in force and is logged."""
        try:
            stat = os.stat(self.path)
            stamp: Stamp | None = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp:
            return False
        try:
            new_stamp, rules = read_rules(self.path)
        except ConfigError as exc:
            log.error("ACL rules not reloaded, the last good ones stay in force: %s", exc)
            self._stamp = stamp
            return False
        self._stamp, self.rules = new_stamp, rules
        log.info("ACL rules reloaded from %s: %d accounts", self.path, len(rules.accounts))
        return True

    def watch(self) -> None:
        """Start looking at the file for changes (after ``load``); ``stop`` ends it."""
        self._task = asyncio.create_task(run_when_due(self._due, asyncio.Event()))

    async def _due(self) -> int:
        await asyncio.to_thread(self.poll)
        return self.watch_interval_ms

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    def refusal(self, request: AccessRequest) -> str | None:
        """None when the rules allow the request, else why not (RocketMQ's message)."""
        try:
            check(self.rules, request)
        except AclDenied as exc:
            return str(exc)
        return None

    def gate(self, dispatcher: Dispatcher) -> AclGate:
        """The dispatcher behind the ACL check (AclGate)."""
        return AclGate(self, dispatcher)


class AclGate:
    """The dispatcher behind the ACL check: a refused request never reaches a handler, so
    nothing is looked up for it. A read's run of requests (TakesRuns) is checked request by
    request, and the allowed ones go on as one run."""

    def __init__(self, acl: AclService, dispatcher: Dispatcher) -> None:
        self.acl = acl
        self.dispatcher = dispatcher

    @property
    def run_codes(self) -> KeysView[int]:
        return self.dispatcher.run_codes

    def refusal(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand | None:
        """The answer to a request the rules refuse, else None."""
        why = self.acl.refusal(remoting_access(cmd, host_of(channel.peer)))
        if why is None:
            return None
        log.warning("ACL refused request code %d from %s with code %d: %s",
                    cmd.code, channel.peer, ResponseCode.SYSTEM_ERROR, why)  # fmt: skip
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {why}")

    def __call__(self, channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        refused = self.refusal(channel, cmd)
        return refused if refused is not None else self.dispatcher(channel, cmd)

    def handle_run(
        self, channel: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]:
        results: list[HandlerResult | Exception] = [None] * len(cmds)
        allowed: list[int] = []
        for i, cmd in enumerate(cmds):
            refused = self.refusal(channel, cmd)
            if refused is None:
                allowed.append(i)
            else:
                results[i] = refused
        if allowed:
            try:
                handled = self.dispatcher.handle_run(channel, [cmds[i] for i in allowed])
            except Exception as exc:  # the allowed ones end with it; the refused keep theirs
                handled = [exc] * len(allowed)
            for i, result in zip(allowed, handled, strict=True):
                results[i] = result
        return results
