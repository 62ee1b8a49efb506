"""The broker's settings: GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25)
(AdminBrokerProcessor). What an update may change, when it takes effect and where it is kept
is decided in ``broker/config_update.py``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pocketmq.broker.config_update import BrokerConfigurator
from pocketmq.conf import parse_properties
from pocketmq.errors import ConfigError, RequestError
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import RemotingChannel, RequestHandler

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)


class BrokerConfigHandlers:
    def __init__(self, broker: Broker) -> None:
        self.configurator = BrokerConfigurator(broker)

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
        }

    def get_broker_config(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        # GetBrokerConfigResponseHeader's version: the DataVersion as JSON text.
        version = json_body.dumps(self.configurator.data_version).decode()
        body = self.configurator.properties_text().encode()
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"version": version}, body=body)

    async def update_broker_config(
        self, channel: RemotingChannel, cmd: RemotingCommand
    ) -> RemotingCommand:
        try:
            update = parse_properties(cmd.body, "the update") if cmd.body else {}
        except ConfigError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "string2Properties error") from exc
        if not update:
            return cmd.response(ResponseCode.SUCCESS)
        log.info("updateBrokerConfig from %s: %s", channel.peer, update)
        change = await self.configurator.update(update)
        remark = None
        if change.after_restart:
            remark = f"takes effect after a restart: {', '.join(change.after_restart)}"
        return cmd.response(ResponseCode.SUCCESS, remark)
