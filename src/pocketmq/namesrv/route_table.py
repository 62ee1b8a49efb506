"""RouteTable: what the NameServer knows about brokers and topics (RouteInfoManager).

Pure state, no I/O; the clock is passed in. Brokers register their topic configs (every 30 s);
a broker not heard from for ``broker_expire_ms`` (120 s) is dropped, and with it the queues
of its broker name once no broker of that name is left.

Write permission can be taken from (and given back to) every topic of a broker name at the
NameServer only (WIPE/ADD_WRITE_PERM_OF_BROKER), so producers stop choosing that broker while
it drains; the change lasts until the broker registers changed topic configs, as in RocketMQ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pocketmq.protocol.fields import check_perm, check_queue_nums
from pocketmq.protocol.names import (
    MASTER_ID,
    PERM_READ_WRITE,
    PERM_WRITE,
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
)

BROKER_EXPIRE_MS = 120_000


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueData:
        """A QueueData JSON object (as in TopicRouteData.queueDatas).

        Raises:
            KeyError, TypeError, ValueError: a member is missing or not a number.
            RequestError: a queue count or permission out of its range (protocol.fields).
        """
        return cls(
            broker_name=str(data["brokerName"]),
            read_queue_nums=check_queue_nums(int(data["readQueueNums"]), "readQueueNums"),
            write_queue_nums=check_queue_nums(int(data["writeQueueNums"]), "writeQueueNums"),
            perm=check_perm(int(data["perm"])),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
            # Older clients (rocketmq-client-cpp) read the field under its 4.x-era name.
            "topicSynFlag": self.topic_sys_flag,
        }


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
        }


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    expire_ms: int
    data_version: dict[str, Any]
    ha_server_addr: str
    conn_id: object | None


@dataclass(slots=True)
class RegisterResult:
    master_addr: str
    ha_server_addr: str


class RouteTable:
    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: dict[str, dict[str, Any]],
        data_version: dict[str, Any],
        filter_servers: list[str],
        now_ms: int,
        conn_id: object | None = None,
        expire_ms: int = BROKER_EXPIRE_MS,
    ) -> RegisterResult:
        """Record a broker and, for a master whose data changed, its topics."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        data = self.broker_addr_table.get(broker_name)
        if data is None:
            data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
        # One address holds one role: a slave promoted to master (or back) moves its entry.
        for bid, addr in list(data.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del data.broker_addrs[bid]
        first_time = data.broker_addrs.get(broker_id) != broker_addr
        data.broker_addrs[broker_id] = broker_addr
        previous = self.broker_live_table.get(broker_addr)
        changed = first_time or previous is None or previous.data_version != data_version
        if broker_id == MASTER_ID and changed:
            # As RocketMQ by default (deleteTopicWithBrokerRegistration=false), topics missing
            # from a registration keep their queues until DELETE_TOPIC_IN_NAMESRV.
            for topic, cfg in topic_configs.items():
                self._update_queue_data(broker_name, topic, cfg)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, expire_ms, data_version, ha_server_addr, conn_id
        )
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)
        master_addr = ""
        if broker_id != MASTER_ID:
            master_addr = data.broker_addrs.get(MASTER_ID, "")
            master_live = self.broker_live_table.get(master_addr)
            return RegisterResult(master_addr, master_live.ha_server_addr if master_live else "")
        return RegisterResult(master_addr, "")

    def _update_queue_data(self, broker_name: str, topic: str, cfg: dict[str, Any]) -> None:
        queues = self.topic_queue_table.setdefault(topic, {})
        queues[broker_name] = QueueData(
            broker_name=broker_name,
            read_queue_nums=int(cfg.get("readQueueNums", 0)),
            write_queue_nums=int(cfg.get("writeQueueNums", 0)),
            perm=int(cfg.get("perm", PERM_READ_WRITE)),
            topic_sys_flag=int(cfg.get("topicSysFlag", 0)),
        )

    def _remove_topic_of_broker(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        data = self.broker_addr_table.get(broker_name)
        if data is None:
            return
        if data.broker_addrs.get(broker_id) == broker_addr:
            del data.broker_addrs[broker_id]
        if not data.broker_addrs:
            del self.broker_addr_table[broker_name]
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            for topic in list(self.topic_queue_table):
                self._remove_topic_of_broker(topic, broker_name)

    def _forget_addr(self, broker_addr: str) -> None:
        for name, data in list(self.broker_addr_table.items()):
            for bid, addr in list(data.broker_addrs.items()):
                if addr == broker_addr:
                    cluster = data.cluster
                    self.unregister_broker(
                        cluster=cluster, broker_addr=addr, broker_name=name, broker_id=bid
                    )

    def scan_not_active(self, now_ms: int) -> list[str]:
        """Drop brokers silent for longer than their expiry; returns their addresses."""
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + live.expire_ms < now_ms
        ]
        for addr in expired:
            self._forget_addr(addr)
        return expired

    def on_connection_closed(self, conn_id: object) -> list[str]:
        """A broker's connection closed: forget the brokers registered through it."""
        gone = [a for a, live in self.broker_live_table.items() if live.conn_id is conn_id]
        for addr in gone:
            self._forget_addr(addr)
        return gone

    def pickup_route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData for topic, or None when no broker serves it."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = [
            self.broker_addr_table[name].to_json()
            for name in sorted(queues)
            if name in self.broker_addr_table
        ]
        if not broker_datas:
            return None
        filter_table: dict[str, list[str]] = {}
        for bd in broker_datas:
            for addr in bd["brokerAddrs"].values():
                if addr in self.filter_server_table:
                    filter_table[addr] = self.filter_server_table[addr]
        return {
            "queueDatas": [q.to_json() for _, q in sorted(queues.items())],
            "brokerDatas": broker_datas,
            "filterServerTable": filter_table,
        }

    def cluster_info(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {n: d.to_json() for n, d in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(n) for c, n in sorted(self.cluster_addr_table.items())},
        }

    def topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, q in self.topic_queue_table.items() if names & q.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget a topic's queues: all of them, or only those of one cluster's brokers."""
        if not cluster:
            return self.topic_queue_table.pop(topic, None) is not None
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return False
        names = self.cluster_addr_table.get(cluster, set())
        removed = [queues.pop(n) for n in names if n in queues]
        if not queues:
            del self.topic_queue_table[topic]
        return bool(removed)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """REGISTER_TOPIC_IN_NAMESRV: set a topic's queues on registered brokers; nothing is
        changed (False) when one of the broker names is not registered."""
        if not queue_datas or any(q.broker_name not in self.broker_addr_table for q in queue_datas):
            return False
        queues = self.topic_queue_table.setdefault(topic, {})
        for q in queue_datas:
            queues[q.broker_name] = q
        return True

    def wipe_write_perm(self, broker_name: str) -> int:
        """Take the write bit from each of broker_name's topics; returns how many it had."""
        return self._set_write_perm(broker_name, wipe=True)

    def add_write_perm(self, broker_name: str) -> int:
        """Give each of broker_name's topics read and write back (RocketMQ sets both, whatever
        the topic had before); returns how many topics."""
        return self._set_write_perm(broker_name, wipe=False)

    def _set_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            q = queues.get(broker_name)
            if q is not None:
                q.perm = q.perm & ~PERM_WRITE if wipe else PERM_READ_WRITE
                count += 1
        return count

    def system_topics(self) -> dict[str, Any]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS as a TopicList: every cluster name and broker name
        (the topics named after them), with one broker's address to ask for the rest."""
        names: set[str] = set()
        for cluster, brokers in self.cluster_addr_table.items():
            names.add(cluster)
            names.update(brokers)
        body: dict[str, Any] = {"topicList": sorted(names)}
        for data in self.broker_addr_table.values():
            if data.broker_addrs:
                body["brokerAddr"] = data.broker_addrs[min(data.broker_addrs)]
                break
        return body

    def topics_by_sys_flag(self, pick: Callable[[int], bool]) -> list[str]:
        """Topics whose TopicSysFlag (of one of their queue datas, as RocketMQ looks at the
        first only) pick accepts: see is_unit_topic and the others below."""
        return sorted(
            topic
            for topic, queues in self.topic_queue_table.items()
            if queues and pick(next(iter(queues.values())).topic_sys_flag)
        )


def is_unit_topic(sys_flag: int) -> bool:
    """GET_UNIT_TOPIC_LIST's pick."""
    return bool(sys_flag & TOPIC_SYS_FLAG_UNIT)


def has_unit_sub(sys_flag: int) -> bool:
    """GET_HAS_UNIT_SUB_TOPIC_LIST's pick."""
    return bool(sys_flag & TOPIC_SYS_FLAG_UNIT_SUB)


def has_unit_sub_not_unit(sys_flag: int) -> bool:
    """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST's pick."""
    return has_unit_sub(sys_flag) and not is_unit_topic(sys_flag)
