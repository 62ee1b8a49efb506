"""`pocketmq dashboard`: a web console for a RocketMQ cluster, pocketmq's or Apache RocketMQ's.

A separate process that talks the remoting protocol to a NameServer and its brokers through
the admin library (`pocketmq.admin`), the same requests as `pocketmq admin`. Pages are rendered
on the server (aiohttp + Jinja2) and work without JavaScript; charts are SVG drawn here from
samples the dashboard takes itself. It holds no state of the cluster beyond those samples.
"""
