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
from pocketmq.admin import AdminClient, AdminError
from pocketmq.dashboard import cluster, topics
from pocketmq.dashboard.charts import Series, line_chart
from pocketmq.dashboard.sampler import Sampler
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


async def cluster_page(request: web.Request) -> web.Response:
    views = await cluster.brokers(request.app[ADMIN])
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
    names = await topics.topic_names(request.app[ADMIN], system=system)
    return _render(request, "topics.html", topics=names, system=system)


async def topic_page(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    route = await request.app[ADMIN].route(name)
    return _render(request, "topic.html", topic=name, queues=topics.route_rows(route))


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    sampling = asyncio.create_task(app[SAMPLER].run())
    yield
    await cancel_and_wait([sampling])
    with contextlib.suppress(Exception):
        await app[ADMIN].close()


def create_app(namesrv_addr: str, *, sample_interval_s: float = 10.0) -> web.Application:
    app = web.Application(middlewares=[_admin_errors])
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
    app.router.add_static("/static", Path(__file__).parent / "static")
    return app
