"""ClientInstance: what producers and consumers share (RocketMQ's MQClientInstance).

It owns the connections, the NameServer list and the topic routes, refreshes routes every
``poll_name_server_interval_s`` (30 s), heartbeats every broker every ``heartbeat_interval_s``
(30 s) with the groups of its producers and consumers, and answers the requests brokers send to
clients (a transaction check goes to the transactional producer of the half's group, which
answers it later). Requests that reach a broker go through ``invoke``, which turns error codes into
BrokerError and connection failures into ConnectionError/TimeoutError.

Its ``clock`` is the client's one clock: its members read it for everything they stamp, schedule
or expire (queue lock liveness, broker fault windows, consume timestamps), so that a test hands
a FakeClock to the instance and drives the time of every member through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pocketmq.client import ids
from pocketmq.client.request_reply import ReplyWaiters
from pocketmq.client.route import FoundBroker, TopicRoute, find_broker_in_subscribe
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import BrokerError, ClientError, ProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.names import MASTER_ID
from pocketmq.protocol.record_codec import decode_message
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel, RemotingClient
from pocketmq.tasks import cancel_and_wait

log = logging.getLogger(__name__)


# (channel the broker asked on, the CHECK_TRANSACTION_STATE request, its decoded half message)
TransactionChecker = Callable[[RemotingChannel, RemotingCommand, MessageExt], None]


class ClientMember(Protocol):
    """A producer or consumer registered with a ClientInstance."""

    group: str

    def topics(self) -> set[str]: ...

    def heartbeat_data(self) -> dict[str, Any]: ...

    def on_route_changed(self, route: TopicRoute) -> None: ...


def parse_namesrv_addrs(value: str | list[str]) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's separator) or a list -> addresses."""
    items = value if isinstance(value, list) else value.replace(",", ";").split(";")
    addrs = [a.strip() for a in items if a.strip()]
    if not addrs:
        raise ClientError("no NameServer address given (namesrv_addr)")
    return addrs


class ClientInstance:
    def __init__(
        self,
        namesrv_addr: str | list[str],
        client_id: str,
        *,
        poll_name_server_interval_s: float = 30.0,
        heartbeat_interval_s: float = 30.0,
        rpc_timeout_s: float = 3.0,
        clock: Clock = SYSTEM_CLOCK,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv_addrs = parse_namesrv_addrs(namesrv_addr)
        self.client_id = client_id
        self.clock = clock
        self.poll_name_server_interval_s = poll_name_server_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.rpc_timeout_s = rpc_timeout_s
        self.dispatcher = Dispatcher()
        # ACL (a broker's aclEnable): every request is signed with the access key's secret.
        self.remoting = RemotingClient(self.dispatcher, credentials=credentials)
        self.routes: dict[str, TopicRoute] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.members: list[ClientMember] = []
        # Consumer group -> what to call when a broker says the group's members changed.
        self.rebalance_hooks: dict[str, Callable[[], None]] = {}
        # Producer group -> its transactional producer's answer to a broker's check-back.
        self.transaction_checkers: dict[str, TransactionChecker] = {}
        self.dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self.dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)
        # Requests of this client's producers waiting for their replies.
        self.replies = ReplyWaiters(clock)
        self.dispatcher.register(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self.replies.on_push_reply
        )
        self._namesrv_index = random.randrange(len(self.namesrv_addrs))
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._tasks = [
            asyncio.create_task(self._every(self.poll_name_server_interval_s, self.refresh_routes)),
            asyncio.create_task(self._every(self.heartbeat_interval_s, self.send_heartbeat)),
        ]

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.remoting.close()
        self._started = False

    @staticmethod
    async def _every(interval_s: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception:
                log.exception("periodic client task failed")

    def _on_ids_changed(self, channel: RemotingChannel, cmd: RemotingCommand) -> None:
        hook = self.rebalance_hooks.get(str(cmd.ext_fields.get("consumerGroup", "")))
        if hook is not None:
            hook()

    def _on_check_transaction(self, channel: RemotingChannel, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (one-way, ClientRemotingProcessor.checkTransactionState):
        hand the half message to the producer of its PGROUP here, which answers later with a
        one-way END_TRANSACTION. A check nobody here can answer is logged and left: the broker
        asks again at its next check."""
        try:
            msg = decode_message(cmd.body, inflate_body=True)
        except ProtocolError as exc:
            log.warning("CHECK_TRANSACTION_STATE from %s: bad message body: %s", channel.peer, exc)
            return
        group = msg.properties.get(MessageConst.PRODUCER_GROUP, "")
        checker = self.transaction_checkers.get(group)
        if checker is None:
            log.warning(
                "CHECK_TRANSACTION_STATE from %s for producer group %r: no transactional "
                "producer of that group here",
                channel.peer,
                group,
            )
            return
        checker(channel, cmd, msg)

    # ------------------------------------------------------------------ requests

    async def invoke(
        self,
        addr: str,
        code: int,
        fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Send a request and return the response if its code is in ``ok``.

        Raises:
            BrokerError: another code.
            ConnectionError, TimeoutError: no answer.
        """
        cmd = RemotingCommand.request(code, fields, body)
        return await self.invoke_command(addr, cmd, timeout_s=timeout_s, ok=ok)

    async def invoke_command(
        self,
        addr: str,
        cmd: RemotingCommand,
        *,
        timeout_s: float | None = None,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """``invoke`` of a request already built (the producer's sends build theirs).

        Raises:
            BrokerError: a response code not in ``ok``.
            ConnectionError, TimeoutError: no answer.
        """
        resp = await self.remoting.invoke(addr, cmd, timeout_s or self.rpc_timeout_s)
        if resp.code not in ok:
            raise BrokerError(resp.code, resp.remark, addr)
        return resp

    async def invoke_oneway(
        self,
        addr: str,
        code: int,
        fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        remark: str | None = None,
    ) -> None:
        cmd = RemotingCommand.request(code, fields, body)
        cmd.remark = remark
        await self.remoting.invoke_oneway(addr, cmd)

    async def namesrv_invoke(self, code: int, fields: dict[str, Any]) -> RemotingCommand:
        """Ask the current NameServer; on a connection failure, the next ones in turn."""
        last: Exception | None = None
        for _ in range(len(self.namesrv_addrs)):
            addr = self.namesrv_addrs[self._namesrv_index % len(self.namesrv_addrs)]
            try:
                return await self.remoting.invoke(
                    addr, RemotingCommand.request(code, fields), self.rpc_timeout_s
                )
            except (ConnectionError, TimeoutError) as exc:
                last = exc
                self._namesrv_index += 1
        raise ClientError(f"no NameServer reachable in {self.namesrv_addrs}: {last}")

    # ------------------------------------------------------------------ routes

    async def fetch_route(self, topic: str) -> TopicRoute | None:
        """The topic's route from the NameServer; None if it does not know the topic.

        Raises:
            ClientError: no NameServer reachable, or a malformed answer.
        """
        resp = await self.namesrv_invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError(resp.code, resp.remark, "namesrv")
        try:
            return TopicRoute.from_json(topic, json_body.loads(resp.body))
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            raise ClientError(f"malformed route of topic {topic}: {exc}") from exc

    async def update_route(self, topic: str) -> TopicRoute | None:
        """Fetch the topic's route, keep it and tell the members when it changed."""
        route = await self.fetch_route(topic)
        if route is None:
            return None
        old = self.routes.get(topic)
        self.routes[topic] = route
        for name, addrs in route.broker_addrs.items():
            self.broker_addrs[name] = addrs
        if old is None or old != route:
            for member in list(self.members):
                member.on_route_changed(route)
        return route

    async def refresh_routes(self) -> None:
        topics = {t for m in self.members for t in m.topics()}
        for topic in topics:
            try:
                await self.update_route(topic)
            except ClientError as exc:
                log.warning("cannot refresh the route of %s: %s", topic, exc)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    async def find_broker_in_subscribe(
        self, topic: str, broker_name: str, broker_id: int, only_this_broker: bool
    ) -> FoundBroker | None:
        """Where a consumer reads or commits (PullAPIWrapper, RemoteBrokerOffsetStore): the
        broker ``broker_id`` of ``broker_name`` as the routes know it; when it is not
        there, the topic's route is fetched again and any broker of the name will do (a
        slave while the master is gone).

        Raises:
            ClientError: the route cannot be fetched.
        """
        found = find_broker_in_subscribe(
            self.broker_addrs.get(broker_name, {}), broker_id, only_this_broker
        )
        if found is None:
            await self.update_route(topic)
            found = find_broker_in_subscribe(
                self.broker_addrs.get(broker_name, {}), broker_id, False
            )
        return found

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_body(self) -> bytes:
        producers: list[dict[str, Any]] = []
        consumers: list[dict[str, Any]] = []
        for member in self.members:
            data = member.heartbeat_data()
            (consumers if "consumeType" in data else producers).append(data)
        return json_body.dumps(
            {"clientID": self.client_id, "producerDataSet": producers, "consumerDataSet": consumers}
        )

    async def send_heartbeat(self) -> None:
        """Heartbeat every master broker; a broker that fails is logged and skipped."""
        body = self.heartbeat_body()
        addrs = {a for addrs in self.broker_addrs.values() for a in addrs.values()}

        async def one(addr: str) -> None:
            try:
                await self.invoke(addr, RequestCode.HEART_BEAT, {}, body)
            except (BrokerError, ConnectionError, TimeoutError) as exc:
                log.info("heartbeat to %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in sorted(addrs)))

    async def unregister(self, producer_group: str | None, consumer_group: str | None) -> None:
        fields: dict[str, Any] = {"clientID": self.client_id}
        if producer_group:
            fields["producerGroup"] = producer_group
        if consumer_group:
            fields["consumerGroup"] = consumer_group
        addrs = {a for addrs in self.broker_addrs.values() for a in addrs.values()}

        async def one(addr: str) -> None:
            with contextlib.suppress(BrokerError, ConnectionError, TimeoutError):
                await self.invoke(addr, RequestCode.UNREGISTER_CLIENT, fields)

        await asyncio.gather(*(one(a) for a in sorted(addrs)))


def new_client_instance(
    namesrv_addr: str | list[str],
    instance_name: str | None,
    credentials: SessionCredentials | None = None,
) -> ClientInstance:
    """The instance a producer or consumer makes for itself when none is given to share."""
    name = instance_name or ids.default_instance_name()
    return ClientInstance(namesrv_addr, ids.client_id(name), credentials=credentials)
