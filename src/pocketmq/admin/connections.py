"""Who is connected to a group, as mqadmin's consumerConnection and producerConnection ask:
GET_CONSUMER_CONNECTION_LIST (203, ConsumerConnection) from the masters of the group's retry
topic (every broker a consumer heartbeats knows it) and GET_PRODUCER_CONNECTION_LIST (204,
ProducerConnection) from the masters of a topic the producers send to.

No formatting here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.errors import RemoteProtocolError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.names import retry_topic
from pocketmq.protocol.remoting import RemotingCommand


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """RocketMQ's Connection."""

    client_id: str
    client_addr: str
    language: str
    version: int

    @classmethod
    def from_json(cls, value: Any) -> ClientConnection:
        return cls(str(value["clientId"]), str(value.get("clientAddr") or ""),
                   str(value.get("language") or ""), int(value.get("version") or 0))  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """RocketMQ's ConsumerConnection, merged over the brokers that answered."""

    connections: list[ClientConnection]
    subscriptions: dict[str, dict[str, Any]]  # topic -> SubscriptionData
    consume_type: str
    message_model: str
    consume_from_where: str
    brokers: list[str] = field(default_factory=list)


async def _masters_of(client: AdminClient, topic: str, missing: str) -> dict[str, str]:
    try:
        masters = route_masters(await client.route(topic))
    except AdminError as exc:
        raise AdminError(f"{missing} ({exc})") from exc
    if not masters:
        raise AdminError(f"{missing} (no master broker serves {topic})")
    return masters


def _json(addr: str, resp: RemotingCommand) -> Any:
    try:
        return json_body.loads(resp.body)
    except RemoteProtocolError as exc:
        raise AdminError(f"{addr} sent a bad connection body: {exc}") from exc


def _connections(addr: str, body: Any) -> list[ClientConnection]:
    try:
        return [ClientConnection.from_json(c) for c in body["connectionSet"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdminError(f"{addr} sent a bad connection list: {exc!r}") from exc


async def consumer_connection(client: AdminClient, group: str) -> ConsumerConnection:
    """The group's consumers as every master of its retry topic sees them.

    Raises:
        AdminError: the group is not online on any broker (CONSUMER_NOT_ONLINE), or a
            broker failed.
    """
    what = f"consumer group {group}"
    masters = await _masters_of(
        client, retry_topic(group), f"{what} is not online: no broker knows the group"
    )
    # A client has a connection to each broker; it is listed once, as the first broker sees it.
    seen: dict[str, ClientConnection] = {}
    subscriptions: dict[str, dict[str, Any]] = {}
    details: dict[str, str] = {}
    answered = []
    for name, addr in masters.items():
        resp = await client.call(
            addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
            ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
        )  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            continue
        body = _json(addr, resp)
        answered.append(name)
        for conn in _connections(addr, body):
            seen.setdefault(conn.client_id, conn)
        subscriptions.update(body.get("subscriptionTable") or {})
        for key in ("consumeType", "messageModel", "consumeFromWhere"):
            details[key] = str(body.get(key) or details.get(key) or "")
    if not seen:
        raise AdminError(f"{what} is not online (no consumer connected to "
                         f"{', '.join(masters)}): start a consumer of the group")  # fmt: skip
    return ConsumerConnection(
        [seen[k] for k in sorted(seen)],
        dict(sorted(subscriptions.items())),
        details["consumeType"], details["messageModel"], details["consumeFromWhere"],
        answered,
    )  # fmt: skip


async def producer_connection(
    client: AdminClient, group: str, topic: str
) -> list[ClientConnection]:
    """The group's producers as the masters of topic see them.

    Raises:
        AdminError: no broker knows a producer of the group, or a broker failed.
    """
    what = f"producer group {group}"
    seen: dict[str, ClientConnection] = {}
    masters = await _masters_of(client, topic, f"{what}: no broker serves the topic {topic}")
    for addr in masters.values():
        resp = await client.call(
            addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group},
            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            continue  # "the producer group[...] not exist" on this broker
        for conn in _connections(addr, _json(addr, resp)):
            seen.setdefault(conn.client_id, conn)
    if not seen:
        raise AdminError(f"{what} has no producer connected to the brokers of {topic}: "
                         "check the group name and that the producer is running")  # fmt: skip
    return [seen[k] for k in sorted(seen)]
