"""asyncio transport for the 4.x remoting protocol: channels, a server and a client."""

from pocketmq.remoting.channel import RemotingChannel, RequestHandler
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.server import Dispatcher, RemotingServer

__all__ = ["Dispatcher", "RemotingChannel", "RemotingClient", "RemotingServer", "RequestHandler"]
