"""``create_app(settings) -> FastAPI``: the control plane's HTTP app.

Routers live in :mod:`rockroll.api.routes` (one per resource); errors are shaped in :mod:`rockroll.api.server.errors`; the
long-lived objects (database, catalog, sandbox placement, sessions, jobs, metrics) are built on
start-up by :func:`rockroll.api.server.state.build_state` and closed on shutdown. Request bodies over the largest
legitimate upload are refused with 413 before they are read (:mod:`rockroll.api.server.body_limit`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from rockroll.api.openenv import mount_openenv
from rockroll.api.routes import alerts, docs, envs, health, jobs, nodes, sandboxes, session_ws, sessions, ui
from rockroll.api.routes.sandboxes import MAX_FILE_BYTES
from rockroll.api.server.auth import list_tokens
from rockroll.api.server.body_limit import BodyLimit, body_limit_for
from rockroll.api.server.errors import install_error_handlers
from rockroll.api.server.host_check import DevHostCheck
from rockroll.api.server.metrics import RequestTimer
from rockroll.api.server.settings import Settings
from rockroll.api.server.state import AppState, build_state
from rockroll.sandbox.node.dataplane import dataplane_routes

__all__ = ["create_app"]

log = logging.getLogger("rockroll.api")


def create_app(settings: Settings | None = None, *, state: AppState | None = None) -> FastAPI:
    """Build the app; the database and sandbox manager open when it starts (lifespan)."""
    settings = settings or Settings()
    settings.check()
    limit = body_limit_for(settings.max_upload_bytes, MAX_FILE_BYTES)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rr = state or build_state(settings)
        app.state.rr = rr
        if settings.dev_mode:
            log.warning("rockroll: DEVELOPMENT MODE, no token needed (bound to %s only)", settings.host)
        elif not list_tokens(rr.db):
            log.warning("rockroll: no API tokens yet; create one with `rockroll token create --name NAME`")
        try:
            yield
        finally:
            rr.close()

    app = FastAPI(
        title="rockroll control plane",
        version="0.1.0",
        description="Env sessions placed on sandboxes, the env hub, jobs and health.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc are served offline by rockroll.api.routes.docs
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    install_error_handlers(app)
    for module in (health, envs, sandboxes, sessions, session_ws, jobs, alerts, ui, docs):
        app.include_router(module.router)
    app.include_router(nodes.router)
    app.router.routes.extend(
        dataplane_routes(lambda a: getattr(getattr(a.state, "rr", None), "agent", None))
    )  # the embedded node agent's data plane
    mount_openenv(app)  # /openenv/<env id>: each env in OpenEnv's protocol (rockroll.api.openenv)

    app.add_middleware(_LazyTimer)
    app.add_middleware(BodyLimit, limit=lambda _scope: limit)
    if settings.dev_mode:  # no token: refuse DNS-rebound requests from web pages (rockroll.api.server.host_check)
        app.add_middleware(DevHostCheck, hosts=settings.dev_hosts)
    return app


class _LazyTimer:
    """Times requests once the app state (and so its metrics) exists."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._timer: RequestTimer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            rr = getattr(scope["app"].state, "rr", None) if "app" in scope else None
            if rr is not None:
                if self._timer is None or self._timer.metrics is not rr.metrics:
                    self._timer = RequestTimer(self.app, rr.metrics)
                await self._timer(scope, receive, send)
                return
        await self.app(scope, receive, send)
