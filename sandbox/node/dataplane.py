"""The data plane of a node agent: clients step their sessions here, the control plane is not on the path.

Routes (a Starlette app, served by uvicorn; the same routes in the embedded agent and in ``rockroll node``):

* ``WS /v1/node/sessions/{id}/ws`` with ``Authorization: Bearer <session token>``: one socket per
  session. Each text message is one call, answered in order:
  ``{"op": "step", "seq": n, "action": "..."}`` -> ``{"seq", "observation", "reward", "terminated",
  "truncated", "info"}`` (``"replayed": true`` for a recorded step; the action is the agent's text or a
  turn with tool calls, ``{"text", "tool_calls": [{"id", "name", "arguments"}]}``, a malformed one a 422
  naming its ``field``); ``{"op": "reset", "seed", "options"}``, ``{"op": "state"}``, ``{"op": "actions"}``
  as on the control plane's socket; ``{"op": "tools"}`` -> ``{"tools": [...]}`` (OpenAI function schemas);
  ``{"op": "seq"}`` -> ``{"last_seq": n}``, the number of the session's last step (a client that
  attaches to a session stepped before starts from there). Errors
  are answered ``{"error": {...}, "status": N}`` and the socket stays open, but a lost sandbox
  closes it (4410) and so does an expired token (4401 ``token_expired``, checked at every message).
  A refused handshake is an HTTP answer with the error body (401 bad or expired token, 404 no such
  session of the token's owner here), or a close with ``4000 + status`` where the server cannot answer so.
  When the API token the session token was asked with is revoked (the control plane tells the agent),
  the socket is answered ``token_revoked`` and closed (4401) at once, even while it waits for a message.
* ``POST /v1/node/step`` with ``Authorization: Bearer <session token>``: ``{"steps": [{"token", "op",
  "seq", "action", "seed"}, ...]}`` -> ``{"results": [...]}``, one round trip per sandbox
  (:meth:`NodeAgent.batch`). Auth comes before the body: the header's token must be a live session
  token of this agent (:meth:`NodeAgent.check`: signed, unexpired, for this node, not revoked; any one
  of the batch's) or the request is answered 401 and its connection closed, no byte of the body read.
  A request without the header (an older client) is held to the first token of the body's first
  :data:`AUTH_PREFIX_BYTES`, checked before any more is read. Each item's own token is then checked
  as before (an item's 401 or 404 answers it alone). The body is read as it streams and refused (413
  ``too_large``) once past ``MAX_BATCH_BYTES``; one that is not JSON is 422 ``validation_error``.
* ``GET /v1/node/health``: the agent's id, endpoint, capacity and session count.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from rockroll.sandbox import errors as sb
from rockroll.sandbox.body_limit import BodyError, read_limited
from rockroll.sandbox.node.agent import AgentSession, NodeAgent
from rockroll.sandbox.node.tokens import SessionClaims, TokenExpired, TokenInvalid, TokenRejected, TokenRevoked
from rockroll.sandbox.node.wire import WireError, dumps, error_answer, loads

__all__ = ["dataplane_routes", "MAX_MESSAGE_CHARS", "MAX_BATCH", "AUTH_PREFIX_BYTES", "bearer"]

MAX_MESSAGE_CHARS = 200_000
MAX_BATCH = 4096
MAX_BATCH_BYTES = 32 * 1024 * 1024
AUTH_PREFIX_BYTES = 4096
"""How much of a batch's body a request without an ``Authorization`` header may have read before auth."""
PREFIX = "/v1/node"
_BODY_TOKEN = re.compile(rb'"token"\s*:\s*"([A-Za-z0-9_.\-]{1,4096})"')


def _dumps(payload: object) -> str:
    return dumps(payload).decode()


def json_response(payload: object, status: int = 200, *, close: bool = False) -> Response:
    """``payload`` as JSON; ``close``: and close the connection (a refusal of a body left unread)."""
    headers = {"connection": "close"} if close else None
    return Response(dumps(payload), status_code=status, media_type="application/json", headers=headers)


def bearer(header: str) -> str:
    """The token of an ``Authorization: Bearer ...`` header ('' when absent)."""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def read_batch(agent: NodeAgent, request: Request) -> bytes:
    """The body of a ``POST /v1/node/step``, read only once a session token of ``agent`` was shown (the
    header's, else the first in the body's first :data:`AUTH_PREFIX_BYTES`); :class:`TokenRejected`
    before any (more) of it is read, :class:`BodyError` past ``MAX_BATCH_BYTES``."""
    token = bearer(request.headers.get("authorization", ""))
    if token:
        agent.check(token)
        return await read_limited(request, MAX_BATCH_BYTES)

    def vet(head: bytes) -> None:
        found = _BODY_TOKEN.search(head)
        if found is None:
            raise TokenInvalid("no session token: send one of the batch's as 'Authorization: Bearer <token>'")
        agent.check(found.group(1).decode())

    return await read_limited(request, MAX_BATCH_BYTES, head=AUTH_PREFIX_BYTES, vet=vet)


def _refusal(e: Exception, *, close: bool = False) -> Response:
    """The answer to a refused batch request (``close``: refused before its body was read to its end)."""
    answer = error_answer(e)
    return json_response({"error": answer["error"]}, answer["status"], close=close)


class _Asgi:
    """An ASGI app of a function ``fn(scope, receive, send)`` (Starlette routes a plain function as
    ``fn(websocket)``, an object as an ASGI app)."""

    def __init__(self, fn: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.fn = fn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.fn(scope, receive, send)


async def _serve(agent: NodeAgent, entry: AgentSession, claims: SessionClaims, receive: Receive, send: Send) -> None:
    """Answer the messages of an accepted session socket until it closes, its token expires or is revoked."""
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    flags = {"receiving": False, "revoked": False}

    def revoked_on_loop() -> None:  # interrupts a wait for the next message, never a call under way
        flags["revoked"] = True
        if flags["receiving"] and task is not None:
            task.cancel()

    def revoked() -> None:  # called from any thread by NodeAgent.revoke
        if not loop.is_closed():
            loop.call_soon_threadsafe(revoked_on_loop)

    unwatch = agent.watch_socket(claims, revoked)
    try:
        while True:
            if flags["revoked"]:
                return await _refuse(send, TokenRevoked("the API token behind this session was revoked"))
            flags["receiving"] = True
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not flags["revoked"] or task is None:
                    raise
                task.uncancel()
                continue
            finally:
                flags["receiving"] = False
            if message["type"] != "websocket.receive":  # websocket.disconnect
                return
            text = message.get("text")
            if text is None:
                text = message.get("bytes") or b""
            try:
                if time.time() > claims.expires_at:
                    raise TokenExpired("the session token has expired; ask the control plane for a fresh one")
                agent.revoke_check(claims)
                if len(text) > MAX_MESSAGE_CHARS:
                    raise WireError(413, "too_large", f"a message is limited to {MAX_MESSAGE_CHARS} characters")
                try:
                    msg = loads(text)
                except ValueError as e:
                    raise WireError(422, "validation_error", f"not JSON: {e}") from e
                answer = await agent.acall(entry, msg)
            except Exception as e:  # noqa: BLE001 - every failure is answered on the socket
                if isinstance(e, TokenRejected):
                    return await _refuse(send, e)
                await send({"type": "websocket.send", "text": _dumps(error_answer(e))})
                if isinstance(e, sb.SandboxLost):
                    await send({"type": "websocket.close", "code": 4410, "reason": "sandbox_lost"})
                    return
                continue
            await send({"type": "websocket.send", "text": _dumps(answer)})
    except OSError:  # the client went away while it was being answered (the server's ClientDisconnected)
        return
    finally:
        unwatch()


async def _refuse(send: Send, e: TokenRejected) -> None:
    """Answer the refusal and close with 4401 and its code (token_expired, token_revoked)."""
    await send({"type": "websocket.send", "text": _dumps(error_answer(e))})
    await send({"type": "websocket.close", "code": 4401, "reason": e.code})


def dataplane_routes(find: Callable[[Starlette], NodeAgent | None]) -> list[BaseRoute]:
    """The data plane's routes on the agent ``find(app)`` returns (see the module docstring).

    ``find`` is called per request (an app builds its agent at start-up, after its routes); when it
    returns None the routes answer 404 ``no_node``.
    """

    def agent_of(conn: HTTPConnection) -> NodeAgent:
        agent = find(conn.app)
        if agent is None:
            raise WireError(404, "no_node", "this server runs no node agent")
        return agent

    async def session_socket(scope: Scope, receive: Receive, send: Send) -> None:
        """The socket as a plain ASGI app: the handshake through Starlette's ``WebSocket``, then the
        messages on the raw ASGI ``receive``/``send``, in a task of its own (each message resumes a
        short chain of coroutines, not the whole middleware stack)."""
        websocket = WebSocket(scope, receive, send)
        session_id = websocket.path_params["session_id"]
        try:
            agent = agent_of(websocket)
            entry, claims = agent.authorise(bearer(websocket.headers.get("authorization", "")), session_id)
        except Exception as e:  # noqa: BLE001 - every refusal is an HTTP answer (or a close code)
            answer = error_answer(e)
            if "websocket.http.response" in websocket.scope.get("extensions", {}):
                await websocket.send_denial_response(json_response({"error": answer["error"]}, answer["status"]))
            else:
                await websocket.close(code=4000 + answer["status"], reason=answer["error"]["code"])
            return
        await websocket.accept()
        await asyncio.ensure_future(_serve(agent, entry, claims, receive, send))  # a cancel reaches it too

    async def step_batch(request: Request) -> Response:
        try:
            agent = agent_of(request)
            try:  # auth first, then read under the limit as it streams: never a body held before both
                body = await read_batch(agent, request)
            except BodyError as e:
                return _refusal(WireError(e.status, e.code, str(e)), close=True)
            except TokenRejected as e:  # the rest of the body is never read: close, do not drain it
                return _refusal(e, close=True)
            try:
                payload = loads(body)
            except (ValueError, RecursionError) as e:
                raise WireError(422, "validation_error", f"not JSON: {e}") from e
            steps = payload.get("steps") if isinstance(payload, dict) else None
            if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_BATCH:
                raise WireError(422, "validation_error", f"'steps' must be a list of 1 to {MAX_BATCH} items")
        except WireError as e:
            return _refusal(e)
        except ClientDisconnect:  # the client went away mid-body: nobody to answer
            return Response(status_code=400)
        return json_response({"results": await agent.abatch(steps)})

    async def health(request: Request) -> Response:
        try:
            return json_response(agent_of(request).info())
        except WireError as e:
            answer = error_answer(e)
            return json_response({"error": answer["error"]}, answer["status"])

    return [
        WebSocketRoute(f"{PREFIX}/sessions/{{session_id}}/ws", _Asgi(session_socket)),
        Route(f"{PREFIX}/step", step_batch, methods=["POST"]),
        Route(f"{PREFIX}/health", health, methods=["GET"]),
    ]
