"""FastAPI dependencies: the app state and the calling principal (bearer-token auth)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rockroll.api.server.auth import DEV_PRINCIPAL, Principal, lookup_token
from rockroll.api.server.errors import ApiError
from rockroll.api.server.state import AppState

__all__ = ["get_state", "get_principal", "principal_for", "TOKEN_CACHE_S", "StateDep", "Who"]

#: how long a looked-up token is trusted without asking the database again: a token revoked by
#: ``rockroll token revoke`` (which writes the database, maybe from another process) stops working
#: within this time, open WebSockets included (they re-check every ``TOKEN_CACHE_S / 2``)
TOKEN_CACHE_S = 0.5

#: declares the bearer scheme in the OpenAPI document (so /docs has "Authorize"); the header is checked below
bearer_scheme = HTTPBearer(
    auto_error=False, bearerFormat="rr_...", description="A token from `rockroll token create --name NAME`."
)


async def get_state(request: Request) -> AppState:
    """The app's :class:`AppState`."""
    return request.app.state.rr


async def get_principal(
    request: Request, _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None
) -> Principal:
    """Who is calling: from ``Authorization: Bearer <token>``, or the dev principal in dev mode.

    Async so that the hot path (a cached token) costs no thread hop; a cache miss looks the
    token up in the database on a worker thread.
    """
    return await principal_for(request.app.state.rr, request.headers.get("authorization", ""))


async def principal_for(state: AppState, header: str) -> Principal:
    """The principal of an ``Authorization`` header value (HTTP routes and WebSockets alike)."""
    scheme, _, token = header.partition(" ")
    if not header:
        if state.settings.dev_mode:
            return DEV_PRINCIPAL
        raise ApiError(401, "unauthorized", "missing bearer token; create one with `rockroll token create --name NAME`")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "the Authorization header must be 'Bearer <token>'")
    token = token.strip()
    now = time.monotonic()
    cached = state.token_cache.get(token)
    if cached is not None and cached[0] > now:
        principal = cached[1]
    else:
        principal = await run_in_threadpool(lookup_token, state.db, token)
        if len(state.token_cache) > 10_000:
            state.token_cache.clear()
        state.token_cache[token] = (now + TOKEN_CACHE_S, principal)
    if principal is None:
        raise ApiError(401, "unauthorized", "unknown or revoked token")
    return principal


#: handler parameter types: ``state: StateDep``, ``who: Who``
StateDep = Annotated[AppState, Depends(get_state)]
Who = Annotated[Principal, Depends(get_principal)]
