"""The admin library: what mqadmin's MQAdminExt asks of a cluster, over the remoting protocol,
against any NameServer (pocketmq's or Apache RocketMQ's) and its brokers. The command line
(`pocketmq admin`) and the dashboard are its users; it imports only `protocol`, `remoting` and
`errors`, never the broker or the store.
"""

from pocketmq.admin.client import AdminClient, AdminError, ClusterInfo, route_masters

__all__ = ["AdminClient", "AdminError", "ClusterInfo", "route_masters"]
