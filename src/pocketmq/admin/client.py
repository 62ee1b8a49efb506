"""AdminClient: requests to a NameServer and its brokers, with errors that say who answered
what. One connection per address, reused for the client's life.

No formatting here: callers get parsed values (dicts of RocketMQ's JSON bodies or small
dataclasses) and render them themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

from pocketmq.errors import PocketMQError, RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.acl_sign import SessionCredentials
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import MASTER_ID
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingClient


class AdminError(PocketMQError):
    """A request failed: unreachable server, refusal (with its code) or a malformed answer."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        # The response code of a refusal; None when no server answered or the answer was bad.
        self.code = code


def request_name(code: int) -> str:
    """``GET_ROUTEINFO_BY_TOPIC (105)``: a request code with RocketMQ's name where it has one."""
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return str(code)


def response_name(code: int) -> str:
    """``17 (TOPIC_NOT_EXIST)``: a response code with RocketMQ's name where it has one."""
    try:
        return f"{code} ({ResponseCode(code).name})"
    except ValueError:
        return str(code)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: cluster name -> broker names, broker name -> {id: address}."""

    clusters: dict[str, list[str]]
    brokers: dict[str, dict[int, str]]

    @classmethod
    def from_json(cls, value: Any) -> ClusterInfo:
        clusters = {str(c): sorted(str(n) for n in names)
                    for c, names in value["clusterAddrTable"].items()}  # fmt: skip
        brokers = {
            str(name): {int(bid): str(addr) for bid, addr in data["brokerAddrs"].items()}
            for name, data in value["brokerAddrTable"].items()
        }
        return cls(clusters, brokers)

    def broker_names(self, cluster: str | None = None) -> list[str]:
        """The broker names of one cluster, or of all clusters."""
        if cluster is not None:
            return list(self.clusters.get(cluster, []))
        return sorted({n for names in self.clusters.values() for n in names})

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, for the names that have a master registered."""
        found = {}
        for name in self.broker_names(cluster):
            addr = self.brokers.get(name, {}).get(MASTER_ID)
            if addr:
                found[name] = addr
        return found


def route_masters(route: dict[str, Any]) -> dict[str, str]:
    """Broker name -> master address of a TopicRouteData (brokers without a master left
    out), sorted by broker name."""
    found = {}
    for data in route.get("brokerDatas") or []:
        addrs = data.get("brokerAddrs") or {}
        addr = addrs.get(str(MASTER_ID)) or addrs.get(MASTER_ID)
        if addr:
            found[str(data["brokerName"])] = str(addr)
    return dict(sorted(found.items()))


def route_read_queues(route: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(broker name, master address, queue id) of every readable queue of a TopicRouteData
    whose broker has a master."""
    masters = route_masters(route)
    return [
        (str(q["brokerName"]), masters[str(q["brokerName"])], queue_id)
        for q in route.get("queueDatas") or []
        if str(q["brokerName"]) in masters
        for queue_id in range(int(q["readQueueNums"]))
    ]


def _broker_callbacks() -> Dispatcher:
    """What brokers may send an admin client: while it pulls as the tools group, the
    group's membership changes (NOTIFY_CONSUMER_IDS_CHANGED, one-way); nothing rebalances
    here, so it is taken and ignored."""
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda channel, cmd: None)
    return dispatcher


class AdminClient:
    """Talks to one NameServer list (";"-separated, tried in order) and any broker."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        remoting: RemotingClient | None = None,
        credentials: SessionCredentials | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        """remoting: the transport to use (a test's); otherwise one is made that signs with
        credentials (ACL) when given."""
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise AdminError("no NameServer address given (expected host:port[;host:port])")
        if remoting is None:
            remoting = RemotingClient(_broker_callbacks(), credentials=credentials)
        self.remoting = remoting
        self.timeout_s = timeout_s

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.remoting.close()

    async def call(
        self,
        addr: str,
        code: int,
        fields: dict[str, Any] | None = None,
        body: bytes = b"",
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to addr; AdminError unless the answer's code is one of ok."""
        try:
            resp = await self.remoting.invoke(
                addr, RemotingCommand.request(code, fields, body), self.timeout_s
            )
        except TimeoutError as exc:
            wait = f"{self.timeout_s:g} s"
            what = request_name(code)
            raise AdminError(f"{addr} did not answer request {what} in {wait}") from exc
        except ConnectionError as exc:
            what = "NameServer" if addr in self.namesrv_addrs else "broker"
            hint = "; check -n/--namesrv-addr" if what == "NameServer" else ""
            raise AdminError(f"{exc} (is the {what} running?{hint})") from exc
        if resp.code not in ok:
            raise AdminError(
                f"{addr} refused request {request_name(code)} with code {response_name(resp.code)}"
                f": {resp.remark or '(no remark)'}",
                resp.code,
            )
        return resp

    async def call_json(
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> Any:
        """A request whose answer is a JSON body (RocketMQ's quirks included)."""
        resp = await self.call(addr, code, fields, body)
        try:
            return json_body.loads(resp.body)
        except RemoteProtocolError as exc:
            raise AdminError(f"{addr} sent a bad body for request {code}: {exc}") from exc

    async def namesrv(
        self,
        code: int,
        fields: dict[str, Any] | None = None,
        body: bytes = b"",
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to the first NameServer that answers (a refusal is not retried)."""
        unreachable: AdminError | None = None
        for addr in self.namesrv_addrs:
            try:
                return await self.call(addr, code, fields, body, ok)
            except AdminError as exc:
                if not isinstance(exc.__cause__, (ConnectionError, TimeoutError)):
                    raise
                unreachable = exc
        assert unreachable is not None
        raise unreachable

    async def namesrv_json(self, code: int, fields: dict[str, Any] | None = None) -> Any:
        resp = await self.namesrv(code, fields)
        try:
            return json_body.loads(resp.body)
        except RemoteProtocolError as exc:
            raise AdminError(f"the NameServer sent a bad body for request {code}: {exc}") from exc

    async def cluster_info(self) -> ClusterInfo:
        value = await self.namesrv_json(RequestCode.GET_BROKER_CLUSTER_INFO)
        try:
            return ClusterInfo.from_json(value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdminError(f"the NameServer sent a bad cluster info body: {exc!r}") from exc

    async def route(self, topic: str) -> dict[str, Any]:
        """GET_ROUTEINFO_BY_TOPIC as RocketMQ's TopicRouteData JSON."""
        try:
            route = await self.namesrv_json(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            raise AdminError(
                f"topic {topic} does not exist (no route on the NameServer; create it with "
                f"update-topic): {exc}",
                exc.code,
            ) from exc
        if not isinstance(route, dict):
            raise AdminError(f"the NameServer sent a bad route for {topic}")
        return route

    async def topic_masters(self, topic: str) -> dict[str, str]:
        """Broker name -> master address of every broker serving topic; AdminError when
        none has a master."""
        masters = route_masters(await self.route(topic))
        if not masters:
            raise AdminError(f"no master broker serves the topic {topic}")
        return masters

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Every master broker's address (of one cluster); AdminError when there is none."""
        found = list((await self.cluster_info()).masters(cluster).values())
        if not found:
            where = f" in cluster {cluster}" if cluster else ""
            raise AdminError(f"no master broker found{where}")
        return found
