"""Receipt handles the endpoint renews for push consumers (the proxy's ReceiptHandleManager).

A push consumer receives with ``auto_renew`` and no invisible duration: it may take as long
as its listener needs. The endpoint pops its messages with the default invisible time and,
while the client is connected, extends each one shortly before it would expire, for at most
``RENEW_MAX_MS``. The client keeps the handle it was given, so its ack, nack or DLQ forward
is translated to the latest handle here, and renewing stops. A client that disconnects is no
longer renewed: its messages come back at their deadline.

Deadlines are compared with the injected clock; the background task scans every
``RENEW_PERIOD_S`` (or half the lead time) and calls ``renew_due``, which a test calls directly
after advancing a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from pocketmq.broker.pop import InvalidReceiptHandle, PopService, ReceiptHandle
from pocketmq.clock import SYSTEM_CLOCK, Clock
from pocketmq.errors import RequestError
from pocketmq.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# RocketMQ proxy's renewMaxTimeMillis and renewSchedulePeriodMillis (shorter when the renewal
# lead time is, so that no handle expires between two scans).
RENEW_MAX_MS = 3 * 3600 * 1000
RENEW_PERIOD_S = 5.0


@dataclass(slots=True)
class _Renewal:
    topic: str
    given: str  # the handle the client holds
    current: str  # the handle after the latest renewal
    deadline: int
    received: int
    # Held while a renewal is being stored, so that a settle sees its result.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ReceiptRenewer:
    def __init__(
        self, pop: PopService, invisible_ms: int, ahead_ms: int, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.pop = pop
        self.clock = clock
        self.invisible_ms = invisible_ms
        self.ahead_ms = ahead_ms
        # (client id, group, message id) -> renewal
        self._handles: dict[tuple[str, str, str], _Renewal] = {}
        # client id -> open Telemetry streams
        self._connected: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    def connected(self, client_id: str) -> None:
        self._connected[client_id] = self._connected.get(client_id, 0) + 1

    def disconnected(self, client_id: str) -> None:
        left = self._connected.get(client_id, 0) - 1
        if left > 0:
            self._connected[client_id] = left
        else:
            self._connected.pop(client_id, None)
            self.forget_client(client_id)

    @property
    def renewing(self) -> bool:
        """Whether any handle is being renewed (else ``settle`` returns every handle as is)."""
        return bool(self._handles)

    def forget_client(self, client_id: str) -> None:
        for key in [k for k in self._handles if k[0] == client_id]:
            del self._handles[key]

    def track(self, client_id: str, group: str, message_id: str, topic: str, handle: str) -> None:
        deadline = ReceiptHandle.decode(handle).deadline
        self._handles[(client_id, group, message_id)] = _Renewal(
            topic, handle, handle, deadline, self.clock.now_ms()
        )

    async def settle(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to act on for a client's ack, nack or forward: the latest renewal of
        the one it holds. Renewing that message stops."""
        key = (client_id, group, message_id)
        renewal = self._handles.get(key)
        if renewal is None or renewal.given != handle:
            return handle
        del self._handles[key]
        async with renewal.lock:
            return renewal.current

    async def _loop(self) -> None:
        period_s = min(RENEW_PERIOD_S, self.ahead_ms / 2000)
        while True:
            await asyncio.sleep(period_s)
            try:
                await self.renew_due()
            except Exception:  # the task boundary: log, keep renewing
                log.exception("receipt handle renewal failed")

    async def renew_due(self) -> None:
        """Extend every handle within ``ahead_ms`` of its deadline whose client is connected;
        forget those of gone clients and those renewed for ``RENEW_MAX_MS`` already."""
        now = self.clock.now_ms()
        for key, renewal in list(self._handles.items()):
            if renewal.deadline - now > self.ahead_ms:
                continue
            client_id, group, _ = key
            if client_id not in self._connected or now - renewal.received > RENEW_MAX_MS:
                self._handles.pop(key, None)
                continue
            async with renewal.lock:
                try:
                    renewal.current = await self.pop.change_invisible(
                        group, renewal.topic, renewal.current, self.invisible_ms
                    )
                except InvalidReceiptHandle:
                    self._handles.pop(key, None)  # acked by another path, or expired
                except RequestError as exc:
                    log.warning("renewal of %s failed: %s", key, exc.remark)
                else:
                    renewal.deadline = ReceiptHandle.decode(renewal.current).deadline
