"""The dashboard's web application: routes, templates and the lifetime of its admin client
and sampler. Views fetch through the admin library on every request (the cluster is the
state); a request that cannot be answered shows what failed, with status 502.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from pocketmq import __version__
from pocketmq.admin import AdminClient, AdminError, cluster, groups, topic_stats, topics
from pocketmq.admin import messages as admin_messages
from pocketmq.admin.connections import consumer_connection
from pocketmq.dashboard import messages
from pocketmq.dashboard.charts import Series, line_chart
from pocketmq.dashboard.sampler import Sampler
from pocketmq.protocol.names import is_system_group, is_system_topic
from pocketmq.tasks import cancel_and_wait

ADMIN: web.AppKey[AdminClient] = web.AppKey("admin", AdminClient)
SAMPLER: web.AppKey[Sampler] = web.AppKey("sampler", Sampler)
TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("templates", jinja2.Environment)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _localtime(ms: int | str) -> str:
    value = int(ms)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value / 1000)) if value else "-"


def _render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    env = request.app[TEMPLATES]
    html = env.get_template(template).render(
        version=__version__, namesrv=";".join(request.app[ADMIN].namesrv_addrs), **context
    )
    return web.Response(text=html, content_type="text/html", status=status)


@web.middleware
async def _admin_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except AdminError as exc:
        return _render(request, "error.html", status=502, error=str(exc))
    except BadForm as exc:
        return _render(request, "error.html", status=400, error=str(exc))


@web.middleware
async def _same_origin_posts(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Forms change the cluster: a POST from another site's page is refused (CSRF)."""
    if request.method == "POST" and request.headers.get("Sec-Fetch-Site", "same-origin") not in (
        "same-origin",
        "none",
    ):
        raise web.HTTPForbidden(text="cross-site form posts are refused")
    return await handler(request)


class BadForm(Exception):
    """A form or query field the user must fix."""


def _time_field(value: str, name: str) -> int:
    """A datetime-local field (server local time) as epoch ms; empty is 0."""
    if not value:
        return 0
    try:
        return int(time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M")) * 1000)
    except ValueError:
        raise BadForm(f"{name}: {value!r} is not a date and time (YYYY-MM-DDTHH:MM)") from None


async def cluster_page(request: web.Request) -> web.Response:
    views = await cluster.broker_rows(request.app[ADMIN])
    sampler = request.app[SAMPLER]
    charts = [
        line_chart(
            f"{v.name} ({v.addr})",
            [
                Series("write bytes/s", sampler.write_rate(v.addr)),
                Series("put TPS", sampler.tps(v.addr, "put")),
                Series("get TPS", sampler.tps(v.addr, "get")),
            ],
        )
        for v in views
    ]
    return _render(request, "cluster.html", brokers=views, charts=charts)


async def topics_page(request: web.Request) -> web.Response:
    system = request.query.get("system") == "1"
    names = await topics.topic_list(request.app[ADMIN])
    if not system:
        names = [t for t in names if not is_system_topic(t)]
    return _render(request, "topics.html", topics=names, system=system)


async def topic_page(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    admin = request.app[ADMIN]
    route = await admin.route(name)
    return _render(
        request, "topic.html", topic=name, rows=topics.route_rows(route),
        queues=await topic_stats.topic_status(admin, name), sent=request.query.get("sent", ""),
    )  # fmt: skip


async def send_to_topic(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    form = await request.post()
    body = str(form.get("body", ""))
    if not body:
        raise BadForm("a message needs a body")
    tags, keys = str(form.get("tags", "")).strip(), str(form.get("keys", "")).strip()
    sent = await admin_messages.send_message(
        request.app[ADMIN], name, body.encode(), tags or None, keys or None
    )
    note = f"{sent.msg_id} to queue {sent.queue_id} at offset {sent.queue_offset}"
    raise web.HTTPSeeOther(f"/topics/{name}?sent={note}")


async def groups_page(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    names = [g for g in await groups.group_names(admin) if not is_system_group(g)]
    rows = [(g, await groups.group_progress(admin, g)) for g in names]
    return _render(request, "groups.html", groups=rows)


async def group_page(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    name = request.match_info["group"]
    stats = await groups.group_progress(admin, name)
    try:
        conns, note = (await consumer_connection(admin, name)).connections, ""
    except AdminError as exc:
        conns, note = [], str(exc)
    chart = line_chart(
        f"lag of {name}",
        [Series("messages behind", request.app[SAMPLER].lag_history.get(name, []))],
    )
    return _render(
        request, "group.html", group=name, stats=stats, connections=conns, note=note,
        topics=sorted({q.topic for q in stats.queues}), chart=chart,
        reset=request.query.get("reset", ""),
    )  # fmt: skip


async def reset_offset(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    form = await request.post()
    topic = str(form.get("topic", "")).strip()
    if not topic:
        raise BadForm("choose the topic whose offsets to reset")
    when = _time_field(str(form.get("timestamp", "")), "timestamp")
    done = await groups.reset_offset_by_time(request.app[ADMIN], name, topic, when)
    summary = ", ".join(f"{b}/{q} -> {o}" for (b, q), o in sorted(done.items()))
    raise web.HTTPSeeOther(f"/groups/{name}?reset={topic}: {summary}")


async def messages_page(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    q = request.query
    topic, key, msg_id = q.get("topic", "").strip(), q.get("key", "").strip(), q.get("id", "")
    found: list[messages.Found] | None = None
    if msg_id.strip():
        if not topic:
            raise BadForm("a search by message id needs its topic")
        found = await messages.by_id(admin, topic, msg_id.strip())
    elif topic and key:
        found = await messages.by_key(admin, topic, key)
    elif topic:
        begin = _time_field(q.get("begin", ""), "begin")
        end = _time_field(q.get("end", ""), "end") or int(time.time() * 1000) + 60_000
        found = await messages.by_time(admin, topic, begin, end)
    return _render(request, "messages.html", query=q, found=found)


async def message_page(request: web.Request) -> web.Response:
    found = await messages.by_offset_id(request.app[ADMIN], request.match_info["msg_id"])
    return _render(request, "message.html", m=found)


async def dlq_page(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    queues = await admin_messages.dead_letters(
        admin, await topics.topic_list(admin), messages.MAX_RESULTS
    )
    letters = [(d.group, d.count, [messages.Found(m, n) for n, m in d.first]) for d in queues]
    return _render(request, "dlq.html", letters=letters, resent=request.query.get("resent", ""))


async def resend(request: web.Request) -> web.Response:
    form = await request.post()
    group, msg_id = str(form.get("group", "")), str(form.get("id", ""))
    if not group or not msg_id:
        raise BadForm("a resend needs the group and the dead letter's message id")
    letter = await messages.by_offset_id(request.app[ADMIN], msg_id)
    new_id = await admin_messages.resend_dead_letter(
        request.app[ADMIN], group, letter.msg, letter.broker_name
    )
    raise web.HTTPSeeOther(f"/dlq?resent={msg_id} as {new_id}")


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    sampling = asyncio.create_task(app[SAMPLER].run())
    yield
    await cancel_and_wait([sampling])
    with contextlib.suppress(Exception):
        await app[ADMIN].close()


def create_app(namesrv_addr: str, *, sample_interval_s: float = 10.0) -> web.Application:
    app = web.Application(middlewares=[_same_origin_posts, _admin_errors])
    admin = AdminClient(namesrv_addr)
    app[ADMIN] = admin
    app[SAMPLER] = Sampler(admin, interval_s=sample_interval_s)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pocketmq.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["localtime"] = _localtime
    app[TEMPLATES] = env
    app.cleanup_ctx.append(_lifecycle)
    app.router.add_get("/", cluster_page)
    app.router.add_get("/topics", topics_page)
    app.router.add_get("/topics/{topic}", topic_page)
    app.router.add_post("/topics/{topic}/send", send_to_topic)
    app.router.add_get("/groups", groups_page)
    app.router.add_get("/groups/{group}", group_page)
    app.router.add_post("/groups/{group}/reset", reset_offset)
    app.router.add_get("/messages", messages_page)
    app.router.add_get("/messages/{msg_id}", message_page)
    app.router.add_get("/dlq", dlq_page)
    app.router.add_post("/dlq/resend", resend)
    app.router.add_static("/static", Path(__file__).parent / "static")
    return app
