"""ACL against a real ``pocketmq serve`` with aclEnable: ``pocketmq admin`` and our client
with credentials; refusals with RocketMQ's code and remark; plain_acl.yml reloaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from acl_setup import (
    ACL_REMARK,
    ADMIN,
    CONSUMER,
    GROUP,
    PLAIN_ACL_PRODUCER_READS,
    PRODUCER,
    TOPIC,
    UNKNOWN,
    WRONG_SECRET,
    acl_serve,
)

from pocketmq.client import (
    ConsumeFromWhere,
    LitePullConsumer,
    Producer,
    SessionCredentials,
    message,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.errors import BrokerError, ClientError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def admin(
    namesrv: str, keys: tuple[str, str] | None, *args: str
) -> subprocess.CompletedProcess[str]:
    creds = ["--access-key", keys[0], "--secret-key", keys[1]] if keys else []
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *creds, *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def credentials(keys: tuple[str, str]) -> SessionCredentials:
    return SessionCredentials(*keys)


async def pull_once(
    namesrv: str, broker: str, keys: tuple[str, str], group: str
) -> tuple[int, str]:
    """One PULL_MESSAGE of queue 0 with these credentials (and no heartbeat): the response's
    code and remark."""
    instance = ClientInstance(namesrv, f"acl-test-{keys[0]}", credentials=credentials(keys))
    try:
        fields = {
            "consumerGroup": group, "topic": TOPIC, "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 1, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0,
        }  # fmt: skip
        try:
            resp = await instance.invoke(
                broker, RequestCode.PULL_MESSAGE, fields,
                ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                    ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY),
            )  # fmt: skip
        except BrokerError as exc:
            return exc.code, exc.remark
        return resp.code, resp.remark or ""
    finally:
        await instance.remoting.close()


async def test_acl_with_the_admin_cli_and_our_client(tmp_path: Path) -> None:
    with acl_serve(tmp_path) as (proc, acl_file):
        namesrv = f"127.0.0.1:{proc.ready['namesrv']}"
        broker = proc.addr

        # Admin requests need an admin account: the producer's is refused, before any lookup.
        refused = admin(namesrv, PRODUCER, "update-topic", "-t", TOPIC)
        assert refused.returncode == 1
        assert f"code {int(ResponseCode.SYSTEM_ERROR)}" in refused.stderr
        assert "Need admin permission for request code=17" in refused.stderr
        anonymous = admin(namesrv, None, "update-topic", "-t", TOPIC)
        assert "No accessKey is configured" in anonymous.stderr
        created = admin(namesrv, ADMIN, "update-topic", "-t", TOPIC)
        assert created.returncode == 0, created.stderr

        # The right key sends; a wrong secret and an unknown key are refused.
        async with Producer("AclPG", namesrv, credentials=credentials(PRODUCER)) as producer:
            result = await producer.send(message(TOPIC, b"allowed"))
            assert result.msg_id
        for keys, why in (
            (WRONG_SECRET, "Check signature failed for accessKey=AclProducer"),
            (UNKNOWN, f"No acl config for {UNKNOWN[0]}"),
        ):
            async with Producer("AclPG", namesrv, credentials=credentials(keys)) as producer:
                with pytest.raises(ClientError, match=why):
                    await producer.send(message(TOPIC, b"refused"))
        # The consumer account may read but not send.
        async with Producer("AclPG", namesrv, credentials=credentials(CONSUMER)) as producer:
            with pytest.raises(ClientError, match=f"No permission for topic:{TOPIC}"):
                await producer.send(message(TOPIC, b"refused"))

        # Pulls: the consumer reads; the producer lacks SUB on the topic.
        consumer = LitePullConsumer(
            GROUP, namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            broker_suspend_ms=200, credentials=credentials(CONSUMER),
        )  # fmt: skip
        consumer.subscribe(TOPIC)
        async with consumer:
            got: list[bytes] = []

            async def polled() -> bool:
                got.extend(m.body for m in await consumer.poll(0.2))
                return b"allowed" in got

            await wait_until(polled, 20, "the allowed message")
        assert got == [b"allowed"]
        assert await pull_once(namesrv, broker, PRODUCER, GROUP) == (
            ResponseCode.SYSTEM_ERROR,
            f"{ACL_REMARK}No permission for topic:{TOPIC}",
        )

        # The file is reloaded: the producer may read once the edit is in force.
        acl_file.write_text(PLAIN_ACL_PRODUCER_READS)

        async def producer_reads() -> bool:
            # Past the ACL, the pull meets the broker: no heartbeat of the group came.
            _, remark = await pull_once(namesrv, broker, PRODUCER, GROUP)
            return not remark.startswith(ACL_REMARK)

        await wait_until(producer_reads, 20, "the reloaded rules")
        # A bad edit keeps those rules.
        acl_file.write_text("accounts: [ {accessKey: broken")
        await wait_until(
            lambda: "ACL rules not reloaded" in proc.log_path.read_text(), 20, "the ERROR line"
        )
        assert await producer_reads()
