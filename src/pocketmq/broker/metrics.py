"""The broker's Prometheus endpoint, as RocketMQ 5 serves it with ``metricsExporterType=PROM``
(on ``metricsPromExporterHost``, brokerIP1 when blank, and ``metricsPromExporterPort``), with
the names of its BrokerMetricsConstant, RemotingMetricsConstant and
DefaultStoreMetricsConstant and their labels (``cluster``, ``node_type``, ``node_id`` on all).

- Counters read at scrape time from the statistics' cumulative totals (``broker/stats.py``),
  never counted a second time: ``rocketmq_messages_in_total`` and
  ``rocketmq_throughput_in_total`` (bytes) by ``topic``, ``message_type`` (normal, fifo,
  delay, transaction: TopicMessageType's metrics value), ``is_system`` and ``protocol_type``;
  ``rocketmq_messages_out_total`` and ``rocketmq_throughput_out_total`` by ``topic``,
  ``consumer_group``, ``is_system``, ``is_retry`` and ``protocol_type`` (remoting or grpc).
  As in RocketMQ 5's processors, puts to and pulls from retry and dead-letter topics are left
  out, and a pop from a group's POP retry topic counts under the topic it retries with
  ``is_retry="true"``. ``is_system``: a system topic (TopicValidator's, with the topics the
  broker creates for itself: its cluster's, its own name's, the reply and trace topics) or a
  ``CID_RMQ_SYS_`` group. A delay or transactional message counts under the topic it was sent
  to (RocketMQ 5 counts it under SCHEDULE_TOPIC_XXXX or the half topic, where its store has
  moved it, and a delay message again under its topic when delivered).
- Gauges: ``rocketmq_consumer_lag_messages`` by ``topic`` and ``consumer_group`` (messages stored
  past the group's committed offsets); ``rocketmq_storage_size`` (bytes used on the store's
  disk), ``rocketmq_storage_flush_behind_bytes``, ``rocketmq_storage_dispatch_behind_bytes``,
  ``rocketmq_storage_message_reserve_time`` (ms since the oldest message was stored).
- ``rocketmq_rpc_latency``: a histogram in milliseconds (RocketMQ's buckets 1, 3, 5, 7, 10,
  100, 1000, 2000, 3000) by ``protocol_type``, ``request_code`` and ``response_code``,
  measured around each remoting request (``TimedDispatcher``) and each unary gRPC call (its
  method's name as request_code, the v2 status code as response_code; ``grpc/activity.py``);
  only when the endpoint is on.

The scrape runs on the event loop, which owns the state it reads (only the disk usage is
asked on a worker thread); the HTTP side is a minimal asyncio server for ``GET /metrics``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from pocketmq.broker.runtime_info import earliest_message_ms
from pocketmq.broker.stats import (
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    Protocol,
    StatsItemSet,
)
from pocketmq.errors import RequestError
from pocketmq.pending import Pending
from pocketmq.protocol.names import (
    TRACE_TOPIC,
    is_dlq_topic,
    is_retry_topic,
    is_sys_consumer_group,
    is_system_topic,
    pop_retry_origin,
    reply_topic,
)
from pocketmq.protocol.remoting import RemotingCommand
from pocketmq.remoting import Dispatcher, RemotingChannel
from pocketmq.remoting.channel import HandlerResult

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)

PROTOCOL_TYPES = {Protocol.REMOTING: "remoting", Protocol.GRPC: "grpc"}
RPC_LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
_MAX_REQUEST_HEAD = 16 * 1024


class RpcLatency:
    """Cumulative latency histograms by (protocol_type, request_code, response_code)."""

    def __init__(self) -> None:
        # Per series: a count per bucket (the last one is +Inf), then the sum in ms.
        self.series: dict[tuple[str, int | str, int], list[float]] = {}

    def observe(
        self, protocol: str, request_code: int | str, response_code: int, ms: float
    ) -> None:
        """One request: ``request_code`` is a remoting code, or a gRPC method's name."""
        key = (protocol, request_code, response_code)
        counts = self.series.get(key)
        if counts is None:
            counts = self.series[key] = [0.0] * (len(RPC_LATENCY_BUCKETS_MS) + 2)
        counts[bisect.bisect_left(RPC_LATENCY_BUCKETS_MS, ms)] += 1
        counts[-1] += ms


class TimedDispatcher(Dispatcher):
    """A Dispatcher that times each request until its response is ready."""

    def __init__(self, latency: RpcLatency) -> None:
        super().__init__()
        self.latency = latency

    def __call__(self, channel: RemotingChannel, cmd: RemotingCommand) -> HandlerResult:
        start = time.perf_counter()
        try:
            result = super().__call__(channel, cmd)
        except RequestError as exc:
            self._observe(cmd.code, exc.code, start)
            raise
        return self._timing(cmd, result, start)

    def handle_run(
        self, channel: RemotingChannel, cmds: list[RemotingCommand]
    ) -> list[HandlerResult | Exception]:
        """Each request of the run timed from the run's start."""
        start = time.perf_counter()
        results = super().handle_run(channel, cmds)
        timed: list[HandlerResult | Exception] = []
        for cmd, result in zip(cmds, results, strict=True):
            if isinstance(result, Exception):
                if isinstance(result, RequestError):
                    self._observe(cmd.code, result.code, start)
                timed.append(result)
            else:
                timed.append(self._timing(cmd, result, start))
        return timed

    def _timing(self, cmd: RemotingCommand, result: HandlerResult, start: float) -> HandlerResult:
        """``result``, observed when its response is ready."""
        if isinstance(result, RemotingCommand):
            self._observe(cmd.code, result.code, start)
        elif isinstance(result, Pending):
            timed: Pending[RemotingCommand] = Pending()
            result.then = functools.partial(self._settled, cmd.code, start, timed)
            return timed
        elif result is not None:
            return self._timed(cmd.code, result, start)
        return result

    def _settled(
        self, code: int, start: float, timed: Pending[RemotingCommand],
        outcome: RemotingCommand | Exception,
    ) -> None:  # fmt: skip
        if isinstance(outcome, RemotingCommand | RequestError):
            self._observe(code, outcome.code, start)
        timed.then(outcome)

    async def _timed(
        self, code: int, pending: Awaitable[RemotingCommand | None], start: float
    ) -> RemotingCommand | None:
        try:
            response = await pending
        except RequestError as exc:
            self._observe(code, exc.code, start)
            raise
        if response is not None:
            self._observe(code, response.code, start)
        return response

    def _observe(self, code: int, response_code: int, start: float) -> None:
        ms = (time.perf_counter() - start) * 1000
        self.latency.observe("remoting", code, response_code, ms)


def _flag(value: bool) -> str:
    """A boolean label as RocketMQ's OpenTelemetry exporter writes it."""
    return "true" if value else "false"


class BrokerCollector(Collector):
    """Builds every family from the broker's state at scrape time."""

    def __init__(self, broker: Broker, latency: RpcLatency) -> None:
        self.broker = broker
        self.latency = latency
        # (used, total) bytes of the store's disk, refreshed off the loop before each scrape.
        self.disk: tuple[int, int] = (0, 0)
        config = broker.config
        self.common = {
            "cluster": config.broker_cluster_name,
            "node_type": "broker",
            "node_id": config.broker_name,
        }
        # System topics of RocketMQ's TopicValidator that a broker adds at start.
        cluster = config.broker_cluster_name
        self.own_topics = {cluster, config.broker_name, reply_topic(cluster), TRACE_TOPIC}

    def _is_system(self, topic: str) -> bool:
        return is_system_topic(topic) or topic in self.own_topics

    def _in_counter(self, name: str, doc: str, stats: StatsItemSet) -> CounterMetricFamily:
        """A family of a put stats set: one series per topic, message type and protocol that
        has counted something."""
        family = CounterMetricFamily(
            name, doc, labels=["topic", "message_type", "is_system", *self.common, "protocol_type"]
        )
        common = list(self.common.values())
        for item in stats.items.values():
            topic = item.labels[0]
            if is_retry_topic(topic) or is_dlq_topic(topic):
                continue
            system = _flag(self._is_system(topic))
            for (protocol, kind), value in item.by_labels.items():
                if value:
                    family.add_metric([topic, kind.lower(), system, *common,
                                       PROTOCOL_TYPES[Protocol(protocol)]], value)  # fmt: skip
        return family

    def _out_counter(self, name: str, doc: str, stats: StatsItemSet) -> CounterMetricFamily:
        """A family of a get stats set: one series per topic, group, retry flag and protocol
        that has counted something."""
        family = CounterMetricFamily(name, doc, labels=[
            "topic", "consumer_group", "is_system", "is_retry", *self.common, "protocol_type",
        ])  # fmt: skip
        common = list(self.common.values())
        for item in stats.items.values():
            topic, group = item.labels
            origin = pop_retry_origin(group, topic)
            if origin is not None:
                topic, retry = origin, "true"
            elif is_retry_topic(topic) or is_dlq_topic(topic):
                continue
            else:
                retry = "false"
            system = _flag(self._is_system(topic) or is_sys_consumer_group(group))
            for protocol, value in enumerate(item.by_protocol):
                if value:
                    family.add_metric([topic, group, system, retry, *common,
                                       PROTOCOL_TYPES[Protocol(protocol)]], value)  # fmt: skip
        return family

    def collect(self) -> Iterator[Metric]:
        sets = self.broker.stats.sets
        yield self._in_counter("rocketmq_messages_in", "Total number of incoming messages",
                               sets[TOPIC_PUT_NUMS])  # fmt: skip
        yield self._in_counter("rocketmq_throughput_in", "Total traffic of incoming messages",
                               sets[TOPIC_PUT_SIZE])  # fmt: skip
        yield self._out_counter("rocketmq_messages_out", "Total number of outgoing messages",
                                sets[GROUP_GET_NUMS])  # fmt: skip
        yield self._out_counter("rocketmq_throughput_out", "Total traffic of outgoing messages",
                                sets[GROUP_GET_SIZE])  # fmt: skip
        yield self._lag()
        yield from self._storage()
        yield self._rpc_latency()

    def _lag(self) -> GaugeMetricFamily:
        broker = self.broker
        family = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages", "Consumer lag messages",
            labels=["topic", "consumer_group", *self.common],
        )  # fmt: skip
        offsets, store = broker.offsets, broker.store
        for group in sorted(broker.subscription_groups.table):
            for topic in sorted(offsets.topics_of_group(group)):
                cfg = broker.topics.get(topic)
                if cfg is None:
                    continue
                lag = 0
                for queue_id in range(cfg.read_queue_nums):
                    committed = max(offsets.query(group, topic, queue_id), 0)
                    lag += max(store.get_max_offset_in_queue(topic, queue_id) - committed, 0)
                family.add_metric([topic, group, *self.common.values()], lag)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=list(self.common))
        family.add_metric(list(self.common.values()), value)
        return family

    def _storage(self) -> Iterator[GaugeMetricFamily]:
        store = self.broker.store
        top = store.max_phy_offset()
        yield self._gauge("rocketmq_storage_size", "Broker storage size", self.disk[0])
        yield self._gauge(
            "rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes",
            max(top - store.commitlog.mfq.flushed_where, 0),
        )  # fmt: skip
        yield self._gauge(
            "rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes",
            max(top - store.reput.reput_from, 0),
        )  # fmt: skip
        earliest = earliest_message_ms(self.broker)
        if earliest > 0:
            yield self._gauge(
                "rocketmq_storage_message_reserve_time", "Broker message reserve time",
                self.broker.clock.now_ms() - earliest,
            )  # fmt: skip

    def _rpc_latency(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "rocketmq_rpc_latency", "Rpc latency in milliseconds",
            labels=["protocol_type", "request_code", "response_code", *self.common],
        )  # fmt: skip
        for (protocol, request_code, response_code), counts in sorted(
            self.latency.series.items(), key=lambda kv: tuple(map(str, kv[0]))
        ):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*RPC_LATENCY_BUCKETS_MS, float("inf")), counts, strict=False):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            family.add_metric(
                [protocol, str(request_code), str(response_code), *self.common.values()],
                buckets, counts[-1],
            )  # fmt: skip
        return family


class MetricsEndpoint:
    """``GET /metrics`` over HTTP/1.1 (one request per connection), on the broker's loop."""

    def __init__(self, broker: Broker, latency: RpcLatency) -> None:
        self.broker = broker
        self.collector = BrokerCollector(broker, latency)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def scrape(self) -> bytes:
        store = self.broker.store
        self.collector.disk = await asyncio.to_thread(
            store.disk_usage, store.commitlog.mfq.directory
        )
        return generate_latest(self.registry)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > _MAX_REQUEST_HEAD:
                raise ValueError("request head too large")
            method, path, *_ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if method != "GET":
                status, body, kind = "405 Method Not Allowed", b"GET only\n", "text/plain"
            elif path.split("?", 1)[0] != "/metrics":
                status, body, kind = "404 Not Found", b"see /metrics\n", "text/plain"
            else:
                status, body, kind = "200 OK", await self.scrape(), CONTENT_TYPE_LATEST
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
            pass  # a client that went away or sent garbage gets nothing more
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
