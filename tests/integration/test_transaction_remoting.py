"""Transactional messages over the 4.x remoting protocol against `pocketmq serve` in a real
process, driven with raw requests as a Java TransactionMQProducer sends them: a half (sysFlag
PREPARED, TRAN_MSG, PGROUP) is invisible until END_TRANSACTION (one-way) commits it; an open
half is checked back over the producer's connection (CHECK_TRANSACTION_STATE) and the answer
commits it; after a SIGKILL the open half is checked again and the committed one is delivered
exactly once."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from server_procs import ServerProcess

from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, decode_offset_msg_id
from pocketmq.protocol.names import TRANS_HALF_TOPIC
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RemotingClient
from waiting import wait_until

pytestmark = pytest.mark.integration
TOPIC = "TxTopic"
GROUP = "PG_TX"
COMMIT = SysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = SysFlag.TRANSACTION_ROLLBACK_TYPE


def start(workdir: Path) -> ServerProcess:
    conf = workdir / "broker.conf"
    # Checks one second after a half was born, every half second.
    conf.write_text("transactionTimeOut=1000\ntransactionCheckInterval=500\n")
    return ServerProcess(
        "serve", workdir, "-c", str(conf), "--store", str(workdir / "store"),
        "--namesrv-port", "0", "--broker-port", "0", listen=False,
    )  # fmt: skip


class Producer:
    """A transactional producer's side of the wire: heartbeats with its group, sends halves,
    ends transactions one-way, and queues the checks the broker sends it."""

    def __init__(self, broker: str, client_id: str = "10.0.0.1@tx") -> None:
        self.broker = broker
        self.client_id = client_id
        self.checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.client = RemotingClient(self._on_request)

    def _on_request(self, channel: RemotingChannel, cmd: RemotingCommand) -> None:
        assert cmd.code == RequestCode.CHECK_TRANSACTION_STATE and cmd.is_oneway
        self.checks.put_nowait(cmd)

    async def heartbeat(self) -> None:
        body = json_body.dumps(
            {"clientID": self.client_id, "producerDataSet": [{"groupName": GROUP}],
             "consumerDataSet": []}
        )  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
        assert (await self.client.invoke(self.broker, cmd, 5)).code == ResponseCode.SUCCESS

    async def send_half(self, uniq: str) -> tuple[int, int]:
        """Send a half; its (tranStateTableOffset, commitLogOffset), as the client keeps them."""
        props = {
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: GROUP,
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
            MessageConst.TAGS: "T",
        }
        cmd = RemotingCommand.request(
            RequestCode.SEND_MESSAGE,
            {"producerGroup": GROUP, "topic": TOPIC, "defaultTopic": "TBW102",
             "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": SysFlag.TRANSACTION_PREPARED_TYPE,
             # Born now: the broker gives up on a half older than fileReservedTime (72 h).
             "bornTimestamp": int(time.time() * 1000), "flag": 0,
             "properties": encode_properties(props),
             "reconsumeTimes": 0},
            f"body-{uniq}".encode(),
        )  # fmt: skip
        resp = await self.client.invoke(self.broker, cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        _, commit_log_offset = decode_offset_msg_id(resp.ext_fields["msgId"])
        return int(resp.ext_fields["queueOffset"]), commit_log_offset

    @staticmethod
    def end_request(
        offsets: tuple[int, int], resolution: int, uniq: str, *, from_check: bool = False
    ) -> RemotingCommand:
        return RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            {"producerGroup": GROUP, "tranStateTableOffset": offsets[0],
             "commitLogOffset": offsets[1], "commitOrRollback": resolution,
             "fromTransactionCheck": str(from_check).lower(), "msgId": uniq,
             "transactionId": uniq},
        )  # fmt: skip

    async def end(self, offsets: tuple[int, int], resolution: int, uniq: str, **kw: bool) -> None:
        await self.client.invoke_oneway(
            self.broker, self.end_request(offsets, resolution, uniq, **kw)
        )

    async def next_check(self) -> tuple[RemotingCommand, MessageExt]:
        cmd = await asyncio.wait_for(self.checks.get(), 20)
        return cmd, decode_message(cmd.body)

    async def consumable(self) -> list[bytes]:
        """Every body a consumer can pull from the topic."""
        bodies = []
        for queue_id in range(4):
            pull = RemotingCommand.request(
                RequestCode.PULL_MESSAGE,
                {"consumerGroup": "CG_TX", "topic": TOPIC, "queueId": queue_id, "queueOffset": 0,
                 "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
                 "subscription": "*", "subVersion": 0},
            )  # fmt: skip
            resp = await self.client.invoke(self.broker, pull, 5)
            pos = 0
            while resp.code == ResponseCode.SUCCESS and pos < len(resp.body):
                size = struct.unpack_from(">i", resp.body, pos)[0]
                bodies.append(decode_message(resp.body[pos : pos + size]).body)
                pos += size
        return sorted(bodies)


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    server = start(tmp_path)
    yield server
    assert server.stop() == 0, server.log_path.read_text()


async def until_consumable(producer: Producer, bodies: list[bytes]) -> None:
    async def arrived() -> bool:
        return await producer.consumable() == bodies

    await wait_until(arrived, 10, lambda: f"consumable messages to be {bodies}")


async def test_end_transaction_commits_and_rolls_back(serve: ServerProcess) -> None:
    producer = Producer(serve.addr)
    try:
        await producer.heartbeat()
        committed = await producer.send_half("C1")
        rolled_back = await producer.send_half("R1")
        asked = await producer.send_half("A1")
        assert await producer.consumable() == []
        await producer.end(committed, COMMIT, "C1")
        await producer.end(rolled_back, ROLLBACK, "R1")
        await until_consumable(producer, [b"body-C1"])
        # Sent as a normal request it is answered, and the message is consumable at once.
        resp = await producer.client.invoke(
            serve.addr, producer.end_request(asked, COMMIT, "A1"), 5
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert await producer.consumable() == [b"body-A1", b"body-C1"]
        # A transaction resolves once: the rollback after the commit is refused.
        resp = await producer.client.invoke(
            serve.addr, producer.end_request(asked, ROLLBACK, "A1"), 5
        )
        assert resp.code == ResponseCode.ILLEGAL_OPERATION and "committed" in resp.remark
        assert await producer.consumable() == [b"body-A1", b"body-C1"]
    finally:
        await producer.client.close()


async def test_an_open_half_is_checked_and_the_answer_commits_it(serve: ServerProcess) -> None:
    producer = Producer(serve.addr)
    try:
        await producer.heartbeat()
        first = await producer.send_half("K1")
        cmd, seen = await producer.next_check()
        header = cmd.ext_fields
        assert (seen.topic, seen.body, seen.uniq_key) == (TOPIC, b"body-K1", "K1")
        assert seen.properties[MessageConst.PRODUCER_GROUP] == GROUP
        assert header["topic"] == TRANS_HALF_TOPIC
        assert header["msgId"] == header["transactionId"] == "K1"
        assert int(header["tranStateTableOffset"]) > first[0]
        assert decode_offset_msg_id(header["offsetMsgId"])[1] == int(header["commitLogOffset"])
        assert await producer.consumable() == []
        offsets = (int(header["tranStateTableOffset"]), int(header["commitLogOffset"]))
        await producer.end(offsets, COMMIT, "K1", from_check=True)
        await until_consumable(producer, [b"body-K1"])
    finally:
        await producer.client.close()


async def test_sigkill_keeps_open_halves_open_and_commits_once(tmp_path: Path) -> None:
    server = start(tmp_path)
    producer = Producer(server.addr)
    try:
        await producer.heartbeat()
        committed = await producer.send_half("C1")
        await producer.send_half("O1")
        await producer.end(committed, COMMIT, "C1")
        await until_consumable(producer, [b"body-C1"])
        cmd, seen = await producer.next_check()  # the open one is checked, left unanswered
        assert seen.uniq_key == "O1"
    finally:
        await producer.client.close()
        server.proc.kill()
        server.proc.wait()
        server.stop()

    server = start(tmp_path)
    producer = Producer(server.addr)
    try:
        await producer.heartbeat()
        cmd, seen = await producer.next_check()
        assert seen.uniq_key == "O1"
        assert int(seen.properties[MessageConst.TRANSACTION_CHECK_TIMES]) >= 2
        assert await producer.consumable() == [b"body-C1"]
        # The committed one cannot be committed again.
        resp = await producer.client.invoke(
            server.addr, producer.end_request(committed, COMMIT, "C1"), 5
        )
        assert resp.code == ResponseCode.ILLEGAL_OPERATION
        offsets = (int(cmd.ext_fields["tranStateTableOffset"]),
                   int(cmd.ext_fields["commitLogOffset"]))  # fmt: skip
        await producer.end(offsets, COMMIT, "O1", from_check=True)
        await until_consumable(producer, [b"body-C1", b"body-O1"])
    finally:
        await producer.client.close()
        assert server.stop() == 0, server.log_path.read_text()
