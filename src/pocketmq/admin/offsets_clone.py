"""Copying a consumer group's offsets to another group, as mqadmin's cloneGroupOffset does:
CLONE_GROUP_OFFSET (314, CloneGroupOffsetRequestHeader: srcGroup, destGroup, topic, offline)
to every master of the source group's retry topic.

No formatting here.
"""

from __future__ import annotations

from pocketmq.admin.client import AdminClient, AdminError, route_masters
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.names import retry_topic


async def clone_group_offset(
    client: AdminClient, src_group: str, dest_group: str, topic: str, offline: bool
) -> dict[str, str]:
    """Broker name -> what that broker answered (its remark).

    Raises:
        AdminError: no broker knows the source group, or one refused.
    """
    try:
        masters = route_masters(await client.route(retry_topic(src_group)))
    except AdminError as exc:
        raise AdminError(f"no broker knows the group {src_group}: {exc}") from exc
    if not masters:
        raise AdminError(f"no master broker knows the group {src_group}")
    header = {"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "offline": offline}
    done = {}
    for name, addr in masters.items():
        resp = await client.call(addr, RequestCode.CLONE_GROUP_OFFSET, header)
        done[name] = resp.remark or "OK"
    return done
