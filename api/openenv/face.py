"""The OpenEnv face of the control plane: ``/openenv/<env id>`` is an OpenEnv env server for that env.

:func:`mount_openenv` mounts one small FastAPI app at ``/openenv/{env_id}`` of ``rockroll serve-api``: its routes
are OpenEnv's (``openenv.core.env_server.http_server``) relative to that base URL, so OpenEnv's stock client
(``GenericEnvClient(base_url="http://HOST:8080/openenv/FrozenLake-v0")``) and its ``openenv validate --url``
work unchanged. A custom env's id keeps its ``/`` (``/openenv/alice/Nim-v0``): the routes are the last segment.

* ``WS /ws``: one rockroll session per socket (:mod:`rockroll.api.openenv.ws`), the way OpenEnv plays.
* ``POST /reset``, ``POST /step``: stateless, as in OpenEnv: each call plays a fresh session and closes it
  (``/step`` resets it first, on the body's ``seed``); ``GET /state``: a fresh session's state.
* ``GET /health``, ``/metadata`` (``readme_content``: the env's system prompt), ``/schema``, ``/openapi.json``.
* ``/mcp``: a tool env's tools over MCP's Streamable HTTP transport, one episode per MCP session
  (:mod:`rockroll.api.openenv.mcp_http`): ``initialize`` opens and resets a rockroll session, ``tools/list``
  lists the env's tools, ``tools/call`` plays one step with that call, ``DELETE`` ends it.

Every route authenticates like the rest of the API, and a caller sees only the envs it may play: another
owner's private env is 404 (``env_not_found``), as on ``/v1/envs``. OpenEnv's client cannot send headers, so
the token may also come as HTTP Basic credentials (any user name, the token as password), which ``requests``,
``httpx`` and ``websockets`` send from a URL's user info: ``http://openenv:rr_...@HOST:8080/openenv/Nim-v0``.
Request bodies that fail validation answer FastAPI's ``{"detail": [...]}`` 422, like OpenEnv's own server; the
other errors answer rockroll's ``{"error": {...}}``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request, Response
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rockroll.api.openenv.access import Caller, CallerDep
from rockroll.api.openenv.mcp_http import add_mcp_routes
from rockroll.api.openenv.wire import ResetData, TextAction, TextState, observation_data, schemas
from rockroll.api.openenv.ws import play_socket
from rockroll.api.server.errors import install_error_handlers
from rockroll.api.server.state import AppState

__all__ = ["mount_openenv", "create_face", "PREFIX"]

#: where the face is mounted: ``/openenv/<env id>/...``
PREFIX = "/openenv"


class StepBody(BaseModel):
    """``POST /step`` (OpenEnv's ``StepRequest``; ``seed``: the fresh session's reset seed)."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)


def _fresh(c: Caller, play: Callable[[Any], Any]) -> Any:
    """``play(live)`` on a session opened for this call alone (closed after it)."""
    sessions = c.state.sessions
    live = sessions.open(c.who, c.env_id, {})
    try:
        return play(live)
    finally:
        sessions.close(live)


def _prompt(c: Caller, request: Request) -> str:
    """The env's system prompt (one fresh session per env version, then remembered)."""
    cache: dict[str, str] = request.app.state.prompts
    key = hashlib.sha256(json.dumps(c.env, sort_keys=True, default=str).encode()).hexdigest()
    if key not in cache:
        if len(cache) > 1000:
            cache.clear()
        cache[key] = str(_fresh(c, lambda live: live.remote.system_prompt()))
    return cache[key]


def create_face(state_of: Callable[[], AppState]) -> FastAPI:
    """The OpenEnv app (see the module docstring); ``state_of()`` is the control plane's :class:`AppState`."""
    face = FastAPI(
        title="rockroll env (OpenEnv protocol)",
        version="1.0.0",  # OpenEnv's HTTP standard 1.x (what `openenv validate` reads from info.version)
        description="An env of the rockroll control plane, served in OpenEnv's WebSocket/HTTP protocol.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served below, to callers who may see the env
    )
    face.state.rr_of = state_of
    face.state.prompts = {}
    install_error_handlers(face)  # rockroll's error shape, except for request validation:

    @face.exception_handler(RequestValidationError)
    async def openenv_422(request: Request, e: RequestValidationError) -> Response:
        """FastAPI's own 422, ``{"detail": [...]}``, as OpenEnv's server answers."""
        return await request_validation_exception_handler(request, e)

    @face.get("/health", tags=["Health"])
    async def health(c: CallerDep) -> dict[str, str]:
        """The env exists for this caller and the server is up."""
        return {"status": "healthy"}

    @face.get("/metadata", tags=["Environment Info"])
    def metadata(c: CallerDep, request: Request) -> dict[str, Any]:
        """Name, description, version and author; ``readme_content``: the env's system prompt."""
        return {
            "name": c.env_id,
            "description": c.env.get("description") or f"rockroll text env {c.env_id}",
            "readme_content": _prompt(c, request),
            "version": str(c.env.get("version") or "") or None,
            "author": c.env.get("owner"),
            "documentation_url": None,
        }

    @face.get("/schema", tags=["Schema"])
    async def schema(c: CallerDep) -> dict[str, Any]:
        """JSON schemas of the action (the agent's text), the observation and the state."""
        return schemas()

    @face.get("/state", tags=["State Management"])
    async def state(c: CallerDep) -> dict[str, Any]:
        """A fresh session's state (over HTTP every call is a new session; play episodes over ``/ws``)."""
        return TextState(env_id=c.env_id).model_dump()

    @face.post("/reset", tags=["Environment Control"])
    def reset(c: CallerDep, body: Annotated[ResetData | None, Body()] = None) -> dict[str, Any]:
        """The first observation of the episode on ``seed``, from a fresh session."""
        data = body or ResetData()
        obs, info = _fresh(c, lambda live: c.state.sessions.reset(live, data.seed, data.options))
        return observation_data(obs, None, False, False, info)

    @face.post("/step", tags=["Environment Control"])
    def step(c: CallerDep, body: StepBody) -> dict[str, Any]:
        """One step of a fresh session reset on ``seed`` (OpenEnv's HTTP step is stateless too)."""
        try:
            action = TextAction.model_validate(body.action)
        except ValidationError as e:
            errors = [{**err, "loc": ("body", "action", *err["loc"])} for err in e.errors(include_url=False)]
            raise RequestValidationError(errors) from e  # OpenEnv's 422: {"detail": [...]}

        def play(live: Any) -> tuple[Any, ...]:
            c.state.sessions.reset(live, body.seed, None)
            return tuple(c.state.sessions.step(live, action.to_action()))

        return observation_data(*_fresh(c, play))

    @face.get("/openapi.json", include_in_schema=False)
    async def openapi(c: CallerDep) -> dict[str, Any]:
        """The OpenAPI document (``openenv validate`` reads OpenEnv's mode from its paths)."""
        return face.openapi()

    add_mcp_routes(face)
    face.add_api_websocket_route("/ws", play_socket)
    return face


def mount_openenv(app: FastAPI) -> None:
    """Serve every env the caller may play at ``/openenv/<env id>`` of ``app`` (see the module docstring)."""
    app.mount(PREFIX + "/{env_id:path}", create_face(lambda: app.state.rr))
