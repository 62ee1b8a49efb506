"""Starts a server, prints its PID and directory as JSON, then waits to be killed: the test
SIGKILLs this process and expects the server to stop by itself."""

import json
import sys

from pocketmq.testing import PocketMQServer

server = PocketMQServer().start()
print(json.dumps({"pid": server.pid, "workdir": str(server.workdir)}), flush=True)
sys.stdin.read()
