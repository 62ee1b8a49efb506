"""Client ids and message ids (UNIQ_KEY) in the layout of RocketMQ's MessageClientIDSetter.

A message id is 16 bytes as 32 hex digits: client IPv4 (4) | pid (2) | a per-process random
value (4) | milliseconds since the start of the current month (4) | a counter (2). Tools read the
time back from it, and it is unique across clients without coordination. The time comes from
an injected clock (the system's for the process-wide generator), so tests pin it.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import os
import random
import socket
import struct
import time

from pocketmq.clock import SYSTEM_CLOCK, Clock


def local_ip() -> str:
    """The IPv4 address this host uses to reach the outside, or 127.0.0.1.

    Connecting a UDP socket sends nothing; it only picks the source address.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def default_instance_name() -> str:
    # RocketMQ 4.9: pid#nanoTime, so two clients in one process get distinct ids; a reading of
    # the process's own monotonic clock, for uniqueness, not time (a fake clock would repeat).
    return f"{os.getpid()}#{time.monotonic_ns()}"


def client_id(instance_name: str, ip: str | None = None) -> str:
    return f"{ip or local_ip()}@{instance_name}"


_TIME_AND_COUNT = struct.Struct(">IH")


class UniqueIdGenerator:
    def __init__(self, ip: str | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        try:
            ip_bytes = socket.inet_aton(ip or local_ip())
        except OSError:
            ip_bytes = bytes(4)
        self._fix = ip_bytes + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))
        self._counter = itertools.count(random.getrandbits(16))
        # (start of the current month, start of the next), in epoch ms: one tuple, replaced
        # whole, so that a thread never reads one month's start with another's end.
        self._month = (0, 0)

    @staticmethod
    def _month_of(now_ms: int) -> tuple[int, int]:
        now = dt.datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (start + dt.timedelta(days=32)).replace(day=1)
        return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)

    def _month_diff(self) -> int:
        now_ms = self.clock.now_ms()
        month_start_ms, next_month_ms = self._month
        if now_ms >= next_month_ms:
            month_start_ms, next_month_ms = self._month = self._month_of(now_ms)
        return (now_ms - month_start_ms) & 0xFFFFFFFF

    def next_id(self) -> str:
        diff = self._month_diff()
        # next() on itertools.count is atomic under the GIL: no lock for the counter.
        count = next(self._counter) & 0xFFFF
        return (self._fix + _TIME_AND_COUNT.pack(diff, count)).hex().upper()

    def next_ids(self, n: int) -> list[str]:
        """``n`` ids of one clock reading (a batch's): ``next_id``'s layout, consecutive
        counters, the shared prefix formatted once."""
        head = (self._fix + self._month_diff().to_bytes(4, "big")).hex().upper()
        counter = self._counter
        return [f"{head}{next(counter) & 0xFFFF:04X}" for _ in range(n)]


@functools.cache
def _generator() -> UniqueIdGenerator:
    return UniqueIdGenerator()


def new_message_id() -> str:
    return _generator().next_id()


def new_message_ids(n: int) -> list[str]:
    return _generator().next_ids(n)
