"""NameServer: broker registration, topic routes, cluster info and KV config over remoting.

One handler per request code (DefaultRequestProcessor). State lives in a RouteTable; the KV
config is persisted to ``kv_config_path`` (JSON, written atomically). Brokers silent for 120 s
are dropped by a scan every ``scan_interval_ms``, and those whose connection closes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.conf import fields_from_properties, read_properties
from pocketmq.errors import RequestError, StoreError
from pocketmq.namesrv.route_table import BROKER_EXPIRE_MS, RouteTable
from pocketmq.protocol import json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_int, get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel, RemotingServer
from pocketmq.store.config_file import read_json, write_json_atomic

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG_NS = "ORDER_TOPIC_CONFIG"


@dataclass(frozen=True, slots=True, kw_only=True)
class NamesrvConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9876
    # Persisted KV config (RocketMQ: ~/namesrv/kvConfig.json).
    kv_config_path: Path = Path.home() / "namesrv" / "kvConfig.json"
    # How often brokers that stopped registering are looked for.
    scan_not_active_broker_interval: int = 5_000
    # A broker silent this long is dropped (BROKER_CHANNEL_EXPIRED_TIME).
    broker_channel_expired_time: int = BROKER_EXPIRE_MS

    @classmethod
    def from_file(cls, path: Path | str, **overrides: Any) -> NamesrvConfig:
        values = fields_from_properties(cls, read_properties(path))
        values.update(overrides)
        return cls(**values)


def _now_ms() -> int:
    return int(time.time() * 1000)


class NameServer:
    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.routes = RouteTable()
        self.kv: dict[str, dict[str, str]] = {}
        dispatcher = Dispatcher()
        for code, handler in (
            (RequestCode.REGISTER_BROKER, self.register_broker),
            (RequestCode.UNREGISTER_BROKER, self.unregister_broker),
            (RequestCode.BROKER_HEARTBEAT, self.broker_heartbeat),
            (RequestCode.QUERY_DATA_VERSION, self.query_data_version),
            (RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route),
            (RequestCode.GET_BROKER_CLUSTER_INFO, self.cluster_info),
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.all_topics),
            (RequestCode.GET_TOPICS_BY_CLUSTER, self.topics_by_cluster),
            (RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic),
            (RequestCode.PUT_KV_CONFIG, self.put_kv),
            (RequestCode.GET_KV_CONFIG, self.get_kv),
            (RequestCode.DELETE_KV_CONFIG, self.delete_kv),
            (RequestCode.GET_KVLIST_BY_NAMESPACE, self.get_kv_list),
        ):
            dispatcher.register(code, handler)
        self.server = RemotingServer(dispatcher, config.listen_host, config.listen_port)
        self._scanner: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> int:
        data = read_json(self.config.kv_config_path)
        if isinstance(data, dict):
            table = data.get("configTable", {})
            self.kv = {ns: dict(kvs) for ns, kvs in table.items() if isinstance(kvs, dict)}
        port = await self.server.start()
        self._scanner = asyncio.create_task(self._scan_loop())
        log.info("name server listening on %s:%d", self.config.listen_host, port)
        return port

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scanner
        await self.server.stop()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            for addr in self.routes.scan_not_active(_now_ms()):
                log.warning(
                    "broker %s expired after %d ms of silence",
                    addr,
                    self.config.broker_channel_expired_time,
                )

    def _on_broker_channel_closed(self, channel: RemotingChannel) -> None:
        for addr in self.routes.on_connection_closed(channel):
            log.info("broker %s disconnected", addr)

    def _watch(self, channel: RemotingChannel) -> None:
        """Forget the brokers of a channel when it closes (once per channel)."""
        if not channel.attributes.get("namesrv-watched"):
            channel.attributes["namesrv-watched"] = True
            channel.closed.add_done_callback(lambda _: self._on_broker_channel_closed(channel))

    # ------------------------------------------------------------------ brokers

    def register_broker(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        broker_name = get_str(cmd, "brokerName")
        broker_addr = get_str(cmd, "brokerAddr")
        cluster = get_str(cmd, "clusterName")
        broker_id = get_int(cmd, "brokerId")
        ha_addr = get_str(cmd, "haServerAddr", "")
        expire = get_int(cmd, "heartbeatTimeoutMillis", self.config.broker_channel_expired_time)
        crc = get_int(cmd, "bodyCrc32", 0)
        if crc and cmd.body and (zlib.crc32(cmd.body) & 0x7FFFFFFF) != crc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if get_bool(cmd, "compressed"):
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                "compressed registration bodies are not supported: set compressedRegister=false",
            )
        topic_configs: dict[str, dict[str, Any]] = {}
        data_version: dict[str, Any] = {}
        filter_servers: list[str] = []
        if cmd.body:
            body = json_body.loads(cmd.body)
            if not isinstance(body, dict):
                raise RequestError(ResponseCode.SYSTEM_ERROR, "register body is not an object")
            wrapper = body.get("topicConfigSerializeWrapper") or {}
            topic_configs = dict(wrapper.get("topicConfigTable") or {})
            data_version = dict(wrapper.get("dataVersion") or {})
            filter_servers = list(body.get("filterServerList") or [])
        result = self.routes.register_broker(
            cluster=cluster,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
            ha_server_addr=ha_addr,
            topic_configs=topic_configs,
            data_version=data_version,
            filter_servers=filter_servers,
            now_ms=_now_ms(),
            conn_id=channel,
            expire_ms=expire,
        )
        self._watch(channel)
        order = self.kv.get(ORDER_TOPIC_CONFIG_NS, {})
        return cmd.response(
            ResponseCode.SUCCESS,
            ext_fields={"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr},
            body=json_body.dumps({"table": order}),
        )

    def unregister_broker(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.unregister_broker(
            cluster=get_str(cmd, "clusterName"),
            broker_addr=get_str(cmd, "brokerAddr"),
            broker_name=get_str(cmd, "brokerName"),
            broker_id=get_int(cmd, "brokerId"),
        )
        return cmd.response(ResponseCode.SUCCESS)

    def broker_heartbeat(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        live = self.routes.broker_live_table.get(get_str(cmd, "brokerAddr"))
        if live is not None:
            live.last_update_ms = _now_ms()
        return cmd.response(ResponseCode.SUCCESS)

    def query_data_version(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        addr = get_str(cmd, "brokerAddr")
        version = json_body.loads(cmd.body) if cmd.body else {}
        live = self.routes.broker_live_table.get(addr)
        changed = live is None or live.data_version != version
        if live is not None:
            live.last_update_ms = _now_ms()
        return cmd.response(
            ResponseCode.SUCCESS,
            ext_fields={"changed": changed},
            body=json_body.dumps(live.data_version) if live is not None else b"",
        )

    # ------------------------------------------------------------------ routes

    def get_route(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        topic = get_str(cmd, "topic")
        route = self.routes.pickup_route(topic)
        if route is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}",
            )
        order = self.kv.get(ORDER_TOPIC_CONFIG_NS, {}).get(topic)
        if order is not None:
            route["orderTopicConf"] = order
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(route))

    def cluster_info(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(self.routes.cluster_info()))

    def all_topics(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        body = json_body.dumps({"topicList": self.routes.topics()})
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def topics_by_cluster(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.routes.topics_of_cluster(get_str(cmd, "cluster"))
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps({"topicList": topics}))

    def delete_topic(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.delete_topic(get_str(cmd, "topic"))
        return cmd.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ KV config

    def _persist_kv(self) -> None:
        try:
            write_json_atomic(self.config.kv_config_path, {"configTable": self.kv})
        except StoreError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc

    def put_kv(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = get_str(cmd, "namespace"), get_str(cmd, "key")
        self.kv.setdefault(ns, {})[key] = get_str(cmd, "value")
        self._persist_kv()
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = get_str(cmd, "namespace"), get_str(cmd, "key")
        value = self.kv.get(ns, {}).get(key)
        if value is None:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}"
            )
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = get_str(cmd, "namespace"), get_str(cmd, "key")
        table = self.kv.get(ns)
        if table is not None and table.pop(key, None) is not None:
            if not table:
                del self.kv[ns]
            self._persist_kv()
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv_list(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        ns = get_str(cmd, "namespace")
        table = self.kv.get(ns)
        if not table:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps({"table": table}))
