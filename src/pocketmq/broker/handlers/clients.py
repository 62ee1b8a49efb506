"""Clients and groups: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42) and CHECK_CLIENT_CONFIG (46) (ClientManageProcessor,
ConsumerManageProcessor). A heartbeat's producers join the producer table (their
connections, and the transaction check-back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pocketmq.broker.connections import Connection
from pocketmq.broker.transaction import RemotingChecker
from pocketmq.errors import ProtocolError, RequestError
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.protocol.names import SubscriptionData
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"lock body: {name} must be a string")
    return value


def _lock_body(cmd: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
    """A LockBatchRequestBody: consumerGroup, clientId and mqSet (topic, brokerName, queueId).

    Raises:
        RequestError: SYSTEM_ERROR for a body of another shape, as RocketMQ fails to decode it;
            a field refused by ``protocol.fields``.
    """
    try:
        data: Any = json_body.loads(cmd.body)
    except ProtocolError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"lock body: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("mqSet"), list):
        raise RequestError(ResponseCode.SYSTEM_ERROR, "lock body: needs an mqSet list")
    group = fields.check_group(_text(data, "consumerGroup"))
    client_id = _text(data, "clientId")
    queues = []
    for mq in data["mqSet"]:
        queue_id = mq.get("queueId") if isinstance(mq, dict) else None
        if not isinstance(mq, dict) or type(queue_id) is not int:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"lock body: {mq!r} is not a queue")
        topic = fields.check_topic(_text(mq, "topic"))
        queues.append((topic, _text(mq, "brokerName"), fields.check_queue_id(queue_id)))
    return group, client_id, queues


def _json_object(cmd: RemotingCommand, what: str) -> dict[str, Any]:
    """A request's JSON body, which must be an object (empty: an empty object).

    Raises:
        RequestError: SYSTEM_ERROR, as RocketMQ fails to decode another body.
    """
    try:
        data: Any = json_body.loads(cmd.body) if cmd.body else {}
    except ProtocolError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body: {exc}") from exc
    if not isinstance(data, dict):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is not an object")
    return data


def _consumer_data(
    heartbeat: dict[str, Any],
) -> list[tuple[dict[str, Any], list[SubscriptionData]]]:
    """The ConsumerData entries of a heartbeat, each naming a valid group, with its
    subscriptions.

    Raises:
        RequestError: SYSTEM_ERROR for entries of another shape, as RocketMQ fails to decode
            them; INVALID_PARAMETER for an invalid group or topic name.
    """
    entries = heartbeat.get("consumerDataSet") or []
    if not isinstance(entries, list):
        raise RequestError(ResponseCode.SYSTEM_ERROR, "heartbeat: consumerDataSet is not a list")
    consumers = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("groupName"), str):
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"heartbeat: {entry!r} is not a consumer")
        subs = entry.get("subscriptionDataSet") or []
        if not isinstance(subs, list):
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, "heartbeat: subscriptionDataSet is not a list"
            )
        fields.check_group(entry["groupName"])
        consumers.append((entry, [fields.check_subscription_data(s) for s in subs]))
    return consumers


def _producer_groups(heartbeat: dict[str, Any]) -> list[str]:
    """The groups of a heartbeat's ProducerData entries.

    Raises:
        RequestError: SYSTEM_ERROR for entries of another shape, INVALID_PARAMETER for an
            invalid group name.
    """
    entries = heartbeat.get("producerDataSet") or []
    names = (
        [e.get("groupName") if isinstance(e, dict) else None for e in entries]
        if isinstance(entries, list)
        else [None]
    )
    if not all(isinstance(name, str) for name in names):
        raise RequestError(
            ResponseCode.SYSTEM_ERROR, f"heartbeat: producerDataSet {entries!r} is not producers"
        )
    return [fields.check_group(str(name)) for name in names]


class ClientHandlers:
    def __init__(self, broker: Broker) -> None:
        self.consumers = broker.consumers
        self.producers = broker.producers
        self.messaging = broker.messaging
        self.broker_name = broker.config.broker_name

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heart_beat(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        data = _json_object(cmd, "heartbeat")
        client_id = str(data.get("clientID", ""))
        consumers = _consumer_data(data)
        producer_groups = _producer_groups(data)
        channel.attributes["client_id"] = client_id
        channel.attributes["language"] = LanguageCode.name_of(cmd.language)
        channel.attributes["version"] = cmd.version
        for consumer, subscriptions in consumers:
            self.messaging.register_consumer(channel, client_id, consumer, subscriptions)
        checker = RemotingChecker(channel, self.broker_name)
        producer_id = client_id or channel.peer
        connection = Connection(
            producer_id, channel.peer, LanguageCode.name_of(cmd.language), cmd.version
        )
        for group in producer_groups:
            self.producers.register(group, producer_id, checker, connection)
        return cmd.response(ResponseCode.SUCCESS)

    def check_client_config(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        """A consumer about to start with a non-TAG subscription asks whether this broker
        serves it (CheckClientRequestBody: clientId, group, subscriptionData): SUCCESS, or the
        code and reason a pull would get (ClientManageProcessor.checkClientConfig)."""
        data = _json_object(cmd, "check client config")
        if data.get("subscriptionData") is not None:
            sub = fields.check_subscription_data(data["subscriptionData"])
            if not sub.is_tag:
                self.messaging.subscription(sub)
        return cmd.response(ResponseCode.SUCCESS)

    def unregister_client(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup")
        if group:
            self.consumers.unregister(channel, group)
        producer_group = cmd.ext_fields.get("producerGroup")
        if producer_group:
            client_id = cmd.ext_fields.get("clientID") or channel.attributes.get("client_id")
            self.producers.unregister(producer_group, str(client_id or channel.peer))
        return cmd.response(ResponseCode.SUCCESS)

    def get_consumer_list(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group = fields.group(cmd)
        ids = self.consumers.client_ids(group)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps({"consumerIdList": ids}))

    def lock_batch_mq(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(cmd)
        held = self.messaging.lock_queues(group, client_id, queues)
        body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held]}
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(body))

    def unlock_batch_mq(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(cmd)
        self.messaging.unlock_queues(group, client_id, queues)
        return cmd.response(ResponseCode.SUCCESS)
