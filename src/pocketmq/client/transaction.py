"""Transactional producer over 4.x remoting (RocketMQ's TransactionMQProducer).

``send_message_in_transaction`` marks the message as a half (TRAN_MSG=true, PGROUP), sends it
through the producer's ordinary send path (the PREPARED sys flag follows from TRAN_MSG), runs
the application's local transaction, then tells the broker that stored the half to commit it,
roll it back or keep waiting: END_TRANSACTION, one-way, with the half's queue offset
(tranStateTableOffset) and CommitLog offset (from the offset message id).

A broker that has no answer after its transaction timeout asks a live producer of the group
(CHECK_TRANSACTION_STATE, one-way); the client instance hands the check to the producer of
the half's PGROUP here. Checks wait in a bounded queue (Java's checkExecutor:
``check_thread_pool_size`` workers, at most ``check_request_hold_max`` waiting; a check beyond
that is logged and left to the broker's next round), and each answer goes back one-way with
fromTransactionCheck=true on the connection the check came on.

The listener's methods may be ``async def`` (awaited on the event loop) or plain functions
(run in threads, never on the loop). A method that raises or returns None means UNKNOW, as in
Java. END_TRANSACTION is never retried here: a lost one is what the broker's check-back is for.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Protocol

from pocketmq.client.producer import Message, Producer, SendResult, SendStatus
from pocketmq.errors import ClientError, ProtocolError, RequestError
from pocketmq.protocol import fields
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.message import MessageConst, MessageExt, SysFlag, decode_offset_msg_id
from pocketmq.protocol.names import AUTO_CREATE_TOPIC_KEY
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel
from pocketmq.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # RocketMQ's spelling


# EndTransactionRequestHeader.commitOrRollback for each outcome.
COMMIT_OR_ROLLBACK: Final = {
    LocalTransactionState.COMMIT_MESSAGE: SysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: SysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: SysFlag.TRANSACTION_NOT_TYPE,
}

ListenerAnswer = LocalTransactionState | None | Awaitable[LocalTransactionState | None]


class TransactionListener(Protocol):
    """What the application tells the producer about its local transactions (Java's
    TransactionListener); each method may be ``async def`` or a plain function."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> ListenerAnswer:
        """Run the local transaction of a half just stored; ``arg`` is the caller's."""
        ...

    def check_local_transaction(self, msg: MessageExt) -> ListenerAnswer:
        """The outcome of the local transaction of a half the broker asks about."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState
    transaction_id: str  # the half's UNIQ_KEY, which the broker's checks name it by


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """CheckTransactionStateRequestHeader, read and validated (``bname`` is RocketMQ 5's
    RpcRequestHeader name of the broker name)."""

    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    broker_name: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> CheckRequest:
        """Raises: RequestError: a missing or malformed offset."""
        f = cmd.ext_fields
        return cls(
            tran_state_table_offset=fields.offset(cmd, "tranStateTableOffset"),
            commit_log_offset=fields.offset(cmd, "commitLogOffset"),
            topic=f.get("topic"),
            broker_name=f.get("bname"),
            msg_id=f.get("msgId"),
            transaction_id=f.get("transactionId"),
            offset_msg_id=f.get("offsetMsgId"),
        )


def _end_fields(
    group: str,
    state: LocalTransactionState,
    tran_state_table_offset: int,
    commit_log_offset: int,
    msg_id: str,
    from_check: bool,
    optional: dict[str, str | None],
) -> dict[str, Any]:
    header: dict[str, Any] = {
        "producerGroup": group,
        "tranStateTableOffset": tran_state_table_offset,
        "commitLogOffset": commit_log_offset,
        "commitOrRollback": COMMIT_OR_ROLLBACK[state],
        "fromTransactionCheck": from_check,
        "msgId": msg_id,
    }
    header.update({k: v for k, v in optional.items() if v is not None})
    return header


def end_fields_after_send(
    msg: Message, result: SendResult, state: LocalTransactionState, group: str
) -> dict[str, Any]:
    """The EndTransactionRequestHeader that ends a half just sent
    (DefaultMQProducerImpl.endTransaction).

    Raises:
        ClientError: the send result's offset message id does not decode.
    """
    try:
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
    except ProtocolError as exc:
        raise ClientError(f"cannot end transaction {result.msg_id}: {exc}") from exc
    return _end_fields(
        group,
        state,
        result.queue_offset,
        commit_log_offset,
        result.msg_id,
        False,
        {
            "topic": msg.topic,
            "bname": result.message_queue.broker_name,
            "transactionId": msg.uniq_key or result.msg_id,
        },
    )


def end_fields_after_check(
    request: CheckRequest, msg: MessageExt, state: LocalTransactionState, group: str
) -> dict[str, Any]:
    """The EndTransactionRequestHeader that answers a broker's check (what
    DefaultMQProducerImpl.checkTransactionState sends): the check's offsets echoed."""
    return _end_fields(
        group,
        state,
        request.tran_state_table_offset,
        request.commit_log_offset,
        msg.uniq_key or msg.msg_id,
        True,
        {
            "topic": request.topic,
            "bname": request.broker_name,
            "transactionId": request.transaction_id,
        },
    )


async def run_listener(
    method: Callable[..., ListenerAnswer], executor: Executor | None, *args: Any
) -> tuple[LocalTransactionState, Exception | None]:
    """A listener method's outcome: an ``async def`` awaited here, a plain function run on
    ``executor`` (None: the loop's default one). What it raises, or a None, is UNKNOW."""
    try:
        if inspect.iscoroutinefunction(method):
            answer = await method(*args)
        else:
            answer = await asyncio.get_running_loop().run_in_executor(executor, method, *args)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:  # the application's code: its failure is an UNKNOW outcome
        return LocalTransactionState.UNKNOW, exc
    if answer is None:
        return LocalTransactionState.UNKNOW, None
    if not isinstance(answer, LocalTransactionState):
        error = TypeError(f"{method.__qualname__} returned {answer!r}, not LocalTransactionState")
        return LocalTransactionState.UNKNOW, error
    return answer, None


@dataclass(frozen=True, slots=True)
class _Check:
    channel: RemotingChannel
    request: CheckRequest
    msg: MessageExt


class TransactionProducer(Producer):
    """A Producer that also sends transactions; its group's halves are checked through it.

    Options beyond Producer's: ``listener`` (a TransactionListener, required to send a
    transaction; may be set later as ``transaction_listener``), ``check_thread_pool_size``
    (checks run at once, Java's checkThreadPoolMaxSize, 1) and ``check_request_hold_max``
    (checks waiting at most, 2000).
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | list[str] = "127.0.0.1:9876",
        *,
        listener: TransactionListener | None = None,
        check_thread_pool_size: int = 1,
        check_request_hold_max: int = 2000,
        **options: Any,
    ) -> None:
        """Raises: ClientError: a check pool or queue size below 1."""
        if check_thread_pool_size < 1 or check_request_hold_max < 1:
            raise ClientError("check_thread_pool_size and check_request_hold_max must be >= 1")
        super().__init__(group, namesrv_addr, **options)
        self.transaction_listener = listener
        self.check_thread_pool_size = check_thread_pool_size
        self.check_request_hold_max = check_request_hold_max
        self._checks: asyncio.Queue[_Check] = asyncio.Queue(check_request_hold_max)
        self._check_executor: ThreadPoolExecutor | None = None
        self._workers: list[asyncio.Task[None]] = []
        # Brokers told of this group by a heartbeat (at start, or after a first half there).
        self._announced: set[str] = set()

    async def start(self) -> None:
        """Raises: ClientError: this client already has a transactional producer of the
        group (the broker's check would not know which to ask)."""
        if self._started:
            return
        if self.group in self.instance.transaction_checkers:
            raise ClientError(
                f"The producer group[{self.group}] has been created before, specify another "
                "name please."
            )
        self.instance.transaction_checkers[self.group] = self._on_check
        # Threads are made on first use: an async check listener never starts one.
        self._check_executor = ThreadPoolExecutor(
            self.check_thread_pool_size, thread_name_prefix=f"tx-check-{self.group}"
        )
        self._workers = [
            asyncio.create_task(self._check_worker()) for _ in range(self.check_thread_pool_size)
        ]
        try:
            await super().start()
        except BaseException:
            await self._stop_checks()
            raise
        await self._announce()

    async def _announce(self) -> None:
        """Heartbeat the brokers of the auto-creation template at once: a broker checks a half
        through a producer it knows from heartbeats, and this one may never send (a standby
        taking over a dead producer's checks). Java's producers track TBW102's route too."""
        try:
            await self.instance.update_route(AUTO_CREATE_TOPIC_KEY)
        except ClientError as exc:
            log.info(
                "no route of %s to announce %s with: %s", AUTO_CREATE_TOPIC_KEY, self.group, exc
            )
        self._announced.update(
            a for addrs in self.instance.broker_addrs.values() for a in addrs.values()
        )
        await self.instance.send_heartbeat()

    async def shutdown(self) -> None:
        if not self._started:
            return
        await self._stop_checks()
        await super().shutdown()

    async def _stop_checks(self) -> None:
        if self.instance.transaction_checkers.get(self.group) == self._on_check:
            del self.instance.transaction_checkers[self.group]
        await cancel_and_wait(self._workers)
        self._workers = []
        if not self._checks.empty():
            log.info(
                "%d transaction checks of %s left unanswered at shutdown; the broker asks again",
                self._checks.qsize(),
                self.group,
            )
            self._checks = asyncio.Queue(self.check_request_hold_max)
        if self._check_executor is not None:
            self._check_executor.shutdown(wait=False, cancel_futures=True)
            self._check_executor = None

    # ------------------------------------------------------------------ sending

    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half, run the local transaction, and end it on the broker.

        The local outcome is in the result; an UNKNOW one (the listener raised, or said so)
        leaves the half to the broker's check-back. A half not stored safely (a flush or slave
        timeout) is rolled back without running the local transaction, as Java does.

        Raises:
            ClientError: no listener, a delayed message, or the half could not be sent.
            BrokerError: a broker refused the half.
        """
        listener = self.transaction_listener
        if listener is None:
            raise ClientError("TransactionListener is null")
        msg.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PRODUCER_GROUP] = self.group
        result = await self.send(msg)
        state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        if result.status is SendStatus.SEND_OK:
            state, error = await run_listener(listener.execute_local_transaction, None, msg, arg)
            if error is not None:
                log.error(
                    "local transaction of %s (topic %s) failed; it stays UNKNOW until the "
                    "broker checks it",
                    result.msg_id,
                    msg.topic,
                    exc_info=error,
                )
        try:
            await self._end_transaction(msg, result, state, error)
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning(
                "local transaction %s ended %s, but END_TRANSACTION was not sent (%s); the "
                "broker will check it",
                result.msg_id,
                state.value,
                exc,
            )
        return TransactionSendResult(
            status=result.status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue,
            queue_offset=result.queue_offset,
            local_transaction_state=state,
            transaction_id=msg.uniq_key or result.msg_id,
        )

    async def _end_transaction(
        self,
        msg: Message,
        result: SendResult,
        state: LocalTransactionState,
        error: Exception | None,
    ) -> None:
        header = end_fields_after_send(msg, result, state, self.group)
        broker = result.message_queue.broker_name
        addr = self.instance.master_addr(broker)
        if addr is None:
            raise ClientError(f"The broker[{broker}] not exist")
        remark = None if error is None else f"executeLocalTransactionBranch exception: {error!r}"
        await self.instance.invoke_oneway(addr, RequestCode.END_TRANSACTION, header, remark=remark)
        if addr not in self._announced:
            # A broker outside TBW102's route: tell it of this group now rather than at the
            # next periodic heartbeat (up to 30 s away).
            self._announced.add(addr)
            await self.instance.send_heartbeat()

    # ------------------------------------------------------------------ check-back

    def _on_check(self, channel: RemotingChannel, cmd: RemotingCommand, msg: MessageExt) -> None:
        try:
            request = CheckRequest.from_command(cmd)
        except RequestError as exc:
            log.warning("CHECK_TRANSACTION_STATE from %s refused: %s", channel.peer, exc.remark)
            return
        try:
            self._checks.put_nowait(_Check(channel, request, msg))
        except asyncio.QueueFull:
            log.warning(
                "check of transaction %s from %s dropped: %d checks already wait "
                "(check_request_hold_max); the broker asks again",
                msg.uniq_key,
                channel.peer,
                self._checks.qsize(),
            )

    async def _check_worker(self) -> None:
        while True:
            check = await self._checks.get()
            try:
                await self._answer(check)
            except Exception:  # a task boundary: the next checks must still be answered
                log.exception("answering the check of transaction %s failed", check.msg.uniq_key)

    async def _answer(self, check: _Check) -> None:
        listener = self.transaction_listener
        if listener is None:
            log.warning(
                "CHECK_TRANSACTION_STATE for %s: producer %s has no TransactionListener",
                check.msg.uniq_key,
                self.group,
            )
            return
        state, error = await run_listener(
            listener.check_local_transaction, self._check_executor, check.msg
        )
        if error is not None:
            log.error(
                "checking local transaction %s failed; answering UNKNOW",
                check.msg.uniq_key,
                exc_info=error,
            )
        header = end_fields_after_check(check.request, check.msg, state, self.group)
        if not check.channel.is_open:
            log.warning(
                "the check of transaction %s is not answered: the connection to %s closed; "
                "the broker asks again",
                check.msg.uniq_key,
                check.channel.peer,
            )
            return
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header)
        if error is not None:
            cmd.remark = f"checkLocalTransactionState Exception: {error!r}"
        check.channel.invoke_oneway(cmd)
