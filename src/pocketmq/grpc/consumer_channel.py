"""A 5.x gRPC consumer in the broker's consumer table, as RocketMQ's proxy registers its
clients in the ConsumerManager: from its Telemetry settings (group, subscriptions, push or
simple) and renewed by its heartbeats, so that GET_CONSUMER_CONNECTION_LIST (203),
GET_CONSUMER_LIST_BY_GROUP (38) and QUERY_TOPIC_CONSUME_BY_WHO (300) see it.

The channel is a stand-in: a 5.x client rebalances by asking (QueryAssignment), so the notice
of a membership change has nothing to reach; a request meant for a remoting client
(GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY) fails as a connection error, which the
broker answers with SYSTEM_ERROR. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pocketmq.broker.connections import DEFAULT_LANGUAGE
from pocketmq.protocol.codes import LanguageCode
from pocketmq.protocol.remoting import CURRENT_VERSION, RemotingCommand
from pocketmq.protocol.versions import version_ordinal

# The proxy's values for a 5.x consumer (ConsumeType by client type; 5.x consumers are always
# clustering and start from the group's offset, else the queue's end).
PUSH_CONSUME_TYPE = "CONSUME_PASSIVELY"
SIMPLE_CONSUME_TYPE = "CONSUME_ACTIVELY"


@dataclass(eq=False)
class GrpcConsumerChannel:
    peer: str
    attributes: dict[str, Any] = field(default_factory=dict)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Nothing to pass on: see the module docstring."""

    async def invoke(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        raise ConnectionError(
            f"{self.peer} is a 5.x gRPC client: it takes no remoting request (code {cmd.code})"
        )

    def close(self) -> None:
        """An expired registration: the stream itself is the client's to close."""


def language_of(name: str) -> str:
    """A 5.x client's language (x-mq-language, or its user agent's) as a LanguageCode name;
    none said is Java, ClientChannelInfo's default."""
    name = {"GOLANG": "GO", "DOT_NET": "DOTNET"}.get(name.upper(), name.upper())
    if not name or name == "LANGUAGE_UNSPECIFIED":
        return DEFAULT_LANGUAGE
    return name if name in LanguageCode.__members__ else LanguageCode.OTHER.name


def client_version(header: str) -> int:
    """The version a 5.x client is registered with, as the proxy's ClientActivity parses its
    ``x-mq-client-version``: upper-cased, a MQVersion name ("v5_0_5" is V5_0_5); anything
    else (none, or "5.0.5" as the official clients send it) is the server's own version."""
    found = version_ordinal(header.upper()) if header else None
    return CURRENT_VERSION if found is None else found


def consumer_channel(peer: str, language: str, version: int) -> GrpcConsumerChannel:
    """The stand-in of one Telemetry stream's consumer."""
    return GrpcConsumerChannel(peer, {"language": language, "version": version})


def consumer_data(group: str, push: bool) -> dict[str, Any]:
    """The ConsumerData a 5.x consumer's settings amount to."""
    return {
        "groupName": group,
        "consumeType": PUSH_CONSUME_TYPE if push else SIMPLE_CONSUME_TYPE,
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
    }
