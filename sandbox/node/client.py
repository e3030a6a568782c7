"""The data-plane client: step a session directly at its node agent, over one WebSocket.

Below the rollout layer (``agentrl`` uses it without importing ``api``); the SDK's ``RemoteEnv``
uses it when the control plane's answer to an open carries a ``data_plane`` (endpoint and token)::

    s = DataPlaneSession(opened["data_plane"]["endpoint"], opened["id"], opened["data_plane"]["token"])
    s.reset(seed=0); obs, reward, terminated, truncated, info = s.step("<answer>Right</answer>")

Each step carries the next sequence number (the first is asked of the agent: ``{"op": "seq"}``). When the socket drops mid-step, the client opens a new
one and sends the *same* number again: the agent answers the recorded step if it ran, or runs it
now, so a step is never applied twice (:mod:`rockroll.sandbox.node.sequence`). Resets and reads are
resent on a new socket too (a reset sent twice leaves the same fresh episode for a seeded reset; an
unseeded one may differ, the episode just began). Errors come back as
:class:`DataPlaneError` with the agent's ``status`` and ``code``.

:class:`BatchStepper` steps many sessions (of one agent) in one ``POST /v1/node/step``, one of their
session tokens in its ``Authorization`` header (the agent checks it before it reads the body).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from rockroll.envs.tools import Action, ToolAction, action_to_wire
from rockroll.sandbox.errors import SandboxError

__all__ = ["DataPlaneError", "DataPlaneSession", "BatchStepper", "ws_url"]

RECONNECTS = 2
HEADER_TRIES = 3
"""How many of a batch's distinct tokens :class:`BatchStepper` shows in turn before a 401 is the answer."""


class DataPlaneError(SandboxError):
    """The agent refused or failed a call: ``status`` (HTTP-like), ``code`` and ``details`` as it answered."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.details = status, code, message, details or {}


def ws_url(endpoint: str, session_id: str) -> str:
    base = endpoint.rstrip("/")
    return "ws" + base.removeprefix("http") + f"/v1/node/sessions/{session_id}/ws"


def _raise_for(answer: dict[str, Any]) -> None:
    err = answer.get("error") or {}
    raise DataPlaneError(int(answer.get("status", 400)), str(err.get("code", "error")), str(err.get("message", "")),
                         err.get("details"))  # fmt: skip


class DataPlaneSession:
    """One session stepped directly at its agent (see the module docstring); not thread-safe."""

    def __init__(
        self,
        endpoint: str,
        session_id: str,
        token: str,
        *,
        timeout_s: float = 120.0,
        refresh: Callable[[], str] | None = None,
        first_seq: int | None = None,
    ) -> None:
        self.url = ws_url(endpoint, session_id)
        self.session_id = session_id
        self.token = token
        self.timeout_s = timeout_s
        self.refresh = refresh  # a fresh token when the agent says the one held expired
        self._ws: ClientConnection | None = None
        self._connect()
        self.next_seq = first_seq if first_seq is not None else int(self.call({"op": "seq"})["last_seq"]) + 1

    def _open(self) -> ClientConnection:
        self._connect()
        if self._ws is None:
            raise DataPlaneError(503, "node_unreachable", f"cannot reach {self.url}")
        return self._ws

    def _connect(self) -> None:
        self.close()
        try:
            opened = connect(
                self.url,
                additional_headers={"Authorization": f"Bearer {self.token}"},
                open_timeout=self.timeout_s,
                max_size=64 * 1024 * 1024,
                compression=None,
            )
            self._ws = opened.__enter__()  # the context-manager form (websockets >= 17); closed in close()
        except InvalidStatus as e:
            try:
                err = json.loads(e.response.body or b"{}").get("error") or {}
            except ValueError:
                err = {}
            status = e.response.status_code
            raise DataPlaneError(status, err.get("code", "handshake_refused"), err.get("message", str(e))) from e
        except OSError as e:
            raise DataPlaneError(503, "node_unreachable", f"cannot reach {self.url}: {e}") from e

    def _roundtrip(self, text: str) -> dict[str, Any]:
        """Send one message and read its answer; on a dropped socket reconnect and send it again."""
        for attempt in range(RECONNECTS + 1):
            try:
                ws = self._ws or self._open()
                ws.send(text)
                return json.loads(ws.recv(timeout=self.timeout_s))
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd is not None else 1006
                self._ws = None
                if code == 4401 and self.refresh is not None and attempt < RECONNECTS:
                    self.token = self.refresh()
                    continue
                if code >= 4000:  # the agent closed it on purpose: say why
                    raise DataPlaneError(code - 4000, e.rcvd.reason if e.rcvd else "closed", str(e)) from e
                if attempt == RECONNECTS:
                    raise DataPlaneError(503, "connection_lost", f"the socket to {self.url} dropped: {e}") from e
        raise AssertionError("unreachable")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """One call; raise :class:`DataPlaneError` for an error answer."""
        answer = self._roundtrip(json.dumps(message, separators=(",", ":")))
        if "error" in answer:
            if answer.get("status") == 401 and self.refresh is not None:
                self.token = self.refresh()
                self._connect()
                answer = self._roundtrip(json.dumps(message, separators=(",", ":")))
            if "error" in answer:
                _raise_for(answer)
        return answer

    def step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        out = self.step_raw(action)
        return out["observation"], float(out["reward"]), bool(out["terminated"]), bool(out["truncated"]), out["info"]

    def step_raw(self, action: Action, seq: int | None = None) -> dict[str, Any]:
        """A step with sequence number ``seq`` (the next one by default): the agent's answer as it is."""
        n = self.next_seq if seq is None else seq
        try:
            out = self.call({"op": "step", "seq": n, "action": action_to_wire(action)})
        except DataPlaneError as e:
            if e.code != "bad_sequence" and seq is None:
                self.next_seq = n + 1  # a step that failed in the env still took its number
            raise
        if seq is None:
            self.next_seq = n + 1
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        out = self.call({"op": "reset", "seed": seed, "options": options})
        return out["observation"], out["info"]

    def get_state(self) -> dict[str, Any]:
        return self.call({"op": "state"})["state"]

    def action_candidates(self) -> list[str]:
        return list(self.call({"op": "actions"})["actions"])

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            finally:
                self._ws = None


def _expires_at(token: str) -> float:
    """The ``exp`` a session token says, read without checking it (0: unreadable): a hint for the choice
    of header token only, the agent checks every token."""
    try:
        part = token.split(".")[1]
        return float(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["exp"])
    except (IndexError, KeyError, TypeError, ValueError):  # binascii.Error is a ValueError
        return 0.0


def _header_tokens(items: list[dict[str, Any]], most: int = HEADER_TRIES) -> list[str]:
    """The tokens of ``items`` to show in the header, in the order to try: distinct, unexpired first."""
    tokens = list(dict.fromkeys(t for item in items if isinstance(t := item.get("token"), str) and t))
    now = time.time()
    return sorted(tokens, key=lambda t: _expires_at(t) <= now)[:most]


class BatchStepper:
    """Steps several sessions of one agent in one request each (``POST /v1/node/step``).

    The agent reads no body before it has checked the ``Authorization`` header: one of the batch's
    session tokens (unexpired first). Where the agent refuses it (401: expired, revoked), the next
    distinct token is shown, up to :data:`HEADER_TRIES`, so one bad token answers its items alone; when
    every token of the batch was refused so, each item is answered its token's refusal (what the agent
    would have answered it), and a batch of more bad tokens than that raises the 401.
    """

    def __init__(self, endpoint: str, *, timeout_s: float = 120.0) -> None:
        self._http = httpx.Client(base_url=endpoint.rstrip("/"), timeout=timeout_s)

    def step(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``items``: ``{"token", "seq", "action"}`` (or ``{"token", "op": "reset", "seed"}``); answers in order.

        An ``action`` is the agent's text or a turn with tool calls (a ``ToolAction`` or its wire form).
        """
        wire = [_wire_item(item) for item in items]
        body = json.dumps({"steps": wire}, separators=(",", ":")).encode()
        refused: dict[str, dict[str, Any]] = {}  # header token -> the agent's refusal of it
        for token in _header_tokens(items) or [""]:
            headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
            resp = self._http.post("/v1/node/step", content=body, headers=headers)
            if resp.status_code != 401:
                break
            refused[token] = resp.json()
        else:
            if all(item.get("token") in refused for item in items):
                return [{"status": 401, "error": refused[item["token"]].get("error")} for item in items]
        payload = resp.json()
        if resp.status_code != 200:
            _raise_for({"status": resp.status_code, **payload})
        return payload["results"]

    def close(self) -> None:
        self._http.close()


def _wire_item(item: dict[str, Any]) -> dict[str, Any]:
    """A batch item as JSON: its ``ToolAction`` in the wire form."""
    action = item.get("action")
    return {**item, "action": action_to_wire(action)} if isinstance(action, ToolAction) else item
