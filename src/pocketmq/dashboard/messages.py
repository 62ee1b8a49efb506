"""The message pages' data: search by key, by id (offset message id or the producer's
UNIQ_KEY) and by store time, and a message's detail, over the admin library. Each result
keeps the broker it came from and its offset id, which the pages link to.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.admin import AdminClient
from pocketmq.admin.messages import messages_by_time
from pocketmq.admin.msg_query import query_on_broker, view_by_offset_id
from pocketmq.errors import ProtocolError
from pocketmq.protocol.message import MessageExt, create_offset_msg_id, decode_offset_msg_id

# At most this many messages per search.
MAX_RESULTS = 64


@dataclass(frozen=True, slots=True)
class Found:
    msg: MessageExt
    broker_name: str

    @property
    def offset_msg_id(self) -> str:
        """Where it is stored: store host + CommitLog offset."""
        return create_offset_msg_id(self.msg.store_host, self.msg.phy_offset)

    @property
    def uniq_key(self) -> str:
        return self.msg.uniq_key or ""

    def body_text(self) -> str:
        """The body as UTF-8 text, or as hex where it is not text."""
        try:
            return self.msg.body.decode("utf-8")
        except UnicodeDecodeError:
            return "hex: " + self.msg.body.hex()


async def by_key(admin: AdminClient, topic: str, key: str, *, unique: bool = False) -> list[Found]:
    """QUERY_MESSAGE on every master of the topic (``unique``: the key is a UNIQ_KEY)."""
    found = []
    for name, addr in (await admin.topic_masters(topic)).items():
        msgs = await query_on_broker(admin, addr, topic, key, unique=unique, max_num=MAX_RESULTS)
        found += [Found(m, name) for m in msgs]
    return sorted(found, key=lambda f: f.msg.store_timestamp)[:MAX_RESULTS]


async def by_offset_id(admin: AdminClient, msg_id: str) -> Found:
    msg = await view_by_offset_id(admin, msg_id)
    names = {a: n for n, a in (await admin.cluster_info()).masters().items()}
    host, port = msg.store_host
    return Found(msg, names.get(f"{host}:{port}", f"{host}:{port}"))


async def by_id(admin: AdminClient, topic: str, msg_id: str) -> list[Found]:
    """A message id as a client shows it: an offset id where it decodes to a master of the
    cluster, else the producer's UNIQ_KEY."""
    try:
        (host, port), _ = decode_offset_msg_id(msg_id)
    except ProtocolError:
        return await by_key(admin, topic, msg_id, unique=True)
    if f"{host}:{port}" in (await admin.cluster_info()).masters().values():
        return [await by_offset_id(admin, msg_id)]
    return await by_key(admin, topic, msg_id, unique=True)


async def by_time(admin: AdminClient, topic: str, begin_ms: int, end_ms: int) -> list[Found]:
    found = await messages_by_time(admin, topic, begin_ms, end_ms, MAX_RESULTS)
    return [Found(m, name) for name, m in found]
