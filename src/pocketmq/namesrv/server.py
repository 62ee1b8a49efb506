"""NameServer: broker registration, topic routes, cluster info and KV config over remoting.

One handler per request code (DefaultRequestProcessor). State lives in a RouteTable; the KV
config is persisted to ``kv_config_path`` (JSON, written atomically). Brokers silent for 120 s
are dropped by a scan every ``scan_interval_ms``, and those whose connection closes at once.

A REGISTER_BROKER body is RegisterBrokerBody as JSON, or, when the header says
``compressed=true`` (a Java broker with compressedRegister=true), a zlib stream (RFC 1950, as
java.util.zip.Deflater writes it) that inflates to, all integers big-endian int32:

    length (4) | DataVersion JSON
    count (4)  | count x ( length (4) | TopicConfig text )
    length (4) | filter server list JSON (an array of strings)
    count (4)  | count x ( length (4) | TopicQueueMappingInfo JSON )   only from brokers >= 5.0.0

A TopicConfig text (TopicConfig.encode) is single-space separated:
``name readQueueNums writeQueueNums perm topicFilterType [attributes JSON]``; it carries no
topicSysFlag, which so reads as 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Any

from pocketmq.errors import ConfigError, RemoteProtocolError, RequestError, StoreError
from pocketmq.jsonfile import read_json, write_bytes_atomic, write_json_atomic
from pocketmq.namesrv import config as ns_config
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.route_table import (
    QueueData,
    RouteTable,
    has_unit_sub,
    has_unit_sub_not_unit,
    is_unit_topic,
)
from pocketmq.protocol import fields, json_body
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.headers import get_bool, get_int, get_str
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel, RemotingServer

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG_NS = "ORDER_TOPIC_CONFIG"
# MQVersion.Version.V5_0_0.ordinal(): brokers from 5.0 on append their static topics' queue
# mappings to a compressed registration body, older ones end it after the filter servers.
V5_0_0 = 413
# Bounds what a registration body may inflate to, against a zlib bomb; a topic config takes
# well under 100 bytes, so this is room for over half a million topics.
MAX_INFLATED_REGISTER_BODY_BYTES = 64 << 20
_TOPIC_FILTER_TYPES = frozenset({"SINGLE_TAG", "MULTI_TAG"})
_INT32 = struct.Struct(">i")


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """What a REGISTER_BROKER body says: topic configs by name (in the JSON TopicConfig
    shape), the broker's DataVersion and its filter servers."""

    topic_configs: dict[str, dict[str, Any]]
    data_version: dict[str, Any]
    filter_servers: list[str]


def _bad_body(detail: str) -> RequestError:
    return RequestError(ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {detail}")


def decode_register_body(body: bytes, compressed: bool, broker_version: int) -> RegisterBrokerBody:
    """Decode a REGISTER_BROKER body, JSON or compressed (see the module docstring).

    Args:
        body: the request body; empty means no topics.
        compressed: the request header's ``compressed`` field.
        broker_version: the request's version (an MQVersion ordinal).

    Raises:
        RequestError: SYSTEM_ERROR naming what is wrong with the body.
    """
    if not body:
        return RegisterBrokerBody({}, {}, [])
    if compressed:
        return _decode_compressed(body, broker_version)
    try:
        data = json_body.loads(body)
    except RemoteProtocolError as exc:
        raise _bad_body(str(exc)) from exc
    if not isinstance(data, dict):
        raise _bad_body("not a JSON object")
    wrapper = data.get("topicConfigSerializeWrapper") or {}
    return RegisterBrokerBody(
        dict(wrapper.get("topicConfigTable") or {}),
        dict(wrapper.get("dataVersion") or {}),
        list(data.get("filterServerList") or []),
    )


class _Inflated:
    """Reads the length-prefixed fields of an inflated compressed body, refusing short ones."""

    def __init__(self, body: bytes) -> None:
        inflater = zlib.decompressobj()
        try:
            self.data = inflater.decompress(body, MAX_INFLATED_REGISTER_BODY_BYTES)
        except zlib.error as exc:
            raise _bad_body(f"not a zlib stream ({exc})") from exc
        if inflater.unconsumed_tail:
            raise _bad_body(f"inflates to more than {MAX_INFLATED_REGISTER_BODY_BYTES} bytes")
        # As Java's InflaterInputStream, a stream cut short is only an error if a field is.
        self.complete = inflater.eof
        self.pos = 0

    def _take(self, size: int, what: str) -> bytes:
        if self.pos + size > len(self.data):
            cut = "" if self.complete else " (the compressed stream is cut short)"
            raise _bad_body(
                f"truncated: {what} needs {size} bytes at offset {self.pos}, "
                f"{len(self.data) - self.pos} left{cut}"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def count(self, what: str) -> int:
        value: int = _INT32.unpack(self._take(4, f"the {what}"))[0]
        if value < 0:
            raise _bad_body(f"the {what} at offset {self.pos - 4} is negative ({value})")
        return value

    def chunk(self, what: str) -> bytes:
        return self._take(self.count(f"length of {what}"), what)

    def json(self, what: str) -> Any:
        try:
            return json_body.loads(self.chunk(what))
        except RemoteProtocolError as exc:
            raise _bad_body(f"{what}: {exc}") from exc


def _decode_compressed(body: bytes, broker_version: int) -> RegisterBrokerBody:
    inflated = _Inflated(body)
    data_version = inflated.json("the data version")
    if not isinstance(data_version, dict):
        raise _bad_body("the data version is not a JSON object")
    topic_configs: dict[str, dict[str, Any]] = {}
    for i in range(inflated.count("topic count")):
        cfg = _topic_config(inflated.chunk(f"topic config {i}"))
        topic_configs[cfg["topicName"]] = cfg
    filter_servers = inflated.json("the filter server list")
    if not isinstance(filter_servers, list) or not all(isinstance(f, str) for f in filter_servers):
        raise _bad_body("the filter server list is not a JSON array of strings")
    if broker_version >= V5_0_0:
        mappings = [
            inflated.json(f"topic queue mapping {i}")
            for i in range(inflated.count("topic queue mapping count"))
        ]
        if mappings:
            # Static topics are not supported: their logical queues are left out of routes.
            log.warning("ignoring the queue mappings of %d static topics", len(mappings))
    return RegisterBrokerBody(topic_configs, data_version, filter_servers)


def _topic_config(text: bytes) -> dict[str, Any]:
    # The attributes (a sixth field) are dropped: nothing in a route carries them.
    try:
        name, read, write, perm, filter_type = text.decode().split(" ", 5)[:5]
        cfg = {
            "topicName": name,
            "readQueueNums": int(read),
            "writeQueueNums": int(write),
            "perm": int(perm),
            "topicFilterType": filter_type,
        }
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad_body(f"bad topic config {text[:200]!r}: {exc}") from exc
    if not name or filter_type not in _TOPIC_FILTER_TYPES:
        raise _bad_body(f"bad topic config {text[:200]!r}")
    return cfg


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
            (RequestCode.REGISTER_TOPIC_IN_NAMESRV, self.register_topic),
            (RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm),
            (RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm),
            (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, self.system_topics),
            (RequestCode.GET_UNIT_TOPIC_LIST, self.unit_topics),
            (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, self.unit_topics),
            (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, self.unit_topics),
            (RequestCode.GET_NAMESRV_CONFIG, self.get_config),
            (RequestCode.UPDATE_NAMESRV_CONFIG, self.update_config),
        ):
            dispatcher.register(code, handler)
        self.server = RemotingServer(dispatcher, config.listen_host, config.listen_port)
        self._scanner: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> int:
        self._load_persisted_config()
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
            try:
                expired = self.routes.scan_not_active(_now_ms())
            except Exception:  # a task boundary: dead brokers must keep expiring
                log.exception("scanning for inactive brokers failed")
                continue
            for addr in expired:
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
        body = decode_register_body(cmd.body, get_bool(cmd, "compressed"), cmd.version)
        result = self.routes.register_broker(
            cluster=cluster,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
            ha_server_addr=ha_addr,
            topic_configs=body.topic_configs,
            data_version=body.data_version,
            filter_servers=body.filter_servers,
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
        self.routes.delete_topic(get_str(cmd, "topic"), get_str(cmd, "clusterName", ""))
        return cmd.response(ResponseCode.SUCCESS)

    def register_topic(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        """REGISTER_TOPIC_IN_NAMESRV: the body is a TopicRouteData whose queueDatas are set."""
        topic = fields.topic(cmd)
        try:
            route = json_body.loads(cmd.body) if cmd.body else {}
            queues = [QueueData.from_json(q) for q in route.get("queueDatas") or []]
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"Failed to decode TopicRouteData: {exc!r}"
            ) from exc
        if queues and not self.routes.register_topic(topic, queues):
            # RocketMQ answers SUCCESS and only logs this; a caller would never learn why.
            raise RequestError(
                ResponseCode.INVALID_PARAMETER,
                f"Register topic {topic} contains a broker name that is not registered",
            )
        return cmd.response(ResponseCode.SUCCESS)

    def wipe_write_perm(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        count = self.routes.wipe_write_perm(name)
        log.info("wipe write perm of broker[%s], client: %s, %d", name, channel.peer, count)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        count = self.routes.add_write_perm(name)
        log.info("add write perm of broker[%s], client: %s, %d", name, channel.peer, count)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    def system_topics(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body.dumps(self.routes.system_topics()))

    def unit_topics(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        pick = {
            RequestCode.GET_UNIT_TOPIC_LIST: is_unit_topic,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: has_unit_sub,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: has_unit_sub_not_unit,
        }[RequestCode(cmd.code)]
        body = json_body.dumps({"topicList": self.routes.topics_by_sys_flag(pick)})
        return cmd.response(ResponseCode.SUCCESS, body=body)

    # ------------------------------------------------------------------ own config

    def _load_persisted_config(self) -> None:
        path = self.config.config_store_path
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
        try:
            self.config, changed = ns_config.apply_update(
                self.config, ns_config.persisted_update(text)
            )
        except RequestError as exc:
            raise ConfigError(f"{path}: {exc.remark}") from exc
        if changed:
            log.info("settings from %s: %s", path, changed)

    def get_config(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        # The port bound, where the config asked for any (0).
        bound = dataclasses.replace(self.config, listen_port=self.port)
        body = ns_config.to_properties_text(bound).encode()
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def update_config(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand:
        updated, changed = ns_config.apply_update(self.config, ns_config.parse_update(cmd.body))
        text = ns_config.to_properties_text(updated).encode()
        try:
            write_bytes_atomic(updated.config_store_path, text)
        except StoreError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        self.config = updated
        log.info("updateConfig called by %s: %s", channel.peer, changed)
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
