"""The route table of the control-plane SDK (:class:`_Routes`) and the helpers it shares with the clients.

Split from :mod:`rockroll.client.sdk`: :class:`~rockroll.client.sdk.Client` and
:class:`~rockroll.client.sdk.AsyncClient` run these routes; the retry policy is told in that module's docstring.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from rockroll.client.errors import error_for
from rockroll.client.responses import Alert, DataPlaneToken
from rockroll.client.types import (
    EnvInfo,
    ExecOutput,
    FileWritten,
    Health,
    JobInfo,
    Overview,
    ResetResult,
    SandboxInfo,
    SessionInfo,
    SessionOpened,
    StepResult,
)
from rockroll.envs.tools import Action, action_to_wire

__all__ = ["IDEMPOTENT_METHODS"]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})
"""Methods resent after a dropped connection (a resend changes nothing on the server)."""
# the connection dropped after the request was (maybe) sent; connect errors are the transport's
_DROPPED = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
# the request never reached a server: safe to send to another replica, whatever its method
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# the replica took the request and gave no answer in the client's timeout (stopped, hung, dying with its
# sockets held): a request safe to resend goes to the next replica, once to each
_STALLED = (httpx.ReadTimeout, httpx.WriteTimeout)


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        body = resp.json()
    except ValueError:
        body = None
    raise error_for(resp.status_code, body, resp.text)


def elsewhere(resp: httpx.Response) -> bool:
    """A ``409 session_elsewhere``: this replica did nothing, the session runs on another replica's
    sandboxes (a custom env's session stays on the replica that opened it); the next replica is tried."""
    if resp.status_code != 409:
        return False
    try:
        return bool(resp.json()["error"]["code"] == "session_elsewhere")
    except (ValueError, KeyError, TypeError):
        return False


def _decode(resp: httpx.Response) -> Any:
    _raise_for(resp)
    if resp.status_code == 204 or not resp.content:
        return None
    if resp.headers.get("content-type", "").startswith("application/json"):
        return resp.json()
    return resp.content


def _env_body(
    env_id: str, kind: str, entry_point: str, source: str | Path | bytes | None, source_name: str, **fields: object
) -> dict[str, object]:
    body: dict[str, object] = {"id": env_id, "kind": kind, "entry_point": entry_point, **fields}
    if source is not None:
        if isinstance(source, (str, Path)):
            path = Path(source)
            source_name = source_name or path.name
            source = path.read_bytes()
        body["source_b64"] = base64.b64encode(source).decode()
        body["source_name"] = source_name
    return body


def _env_path(env_id: str) -> str:
    """``env_id`` as a URL path: its namespace's ``/`` kept, anything else URL-quoted."""
    return quote(env_id, safe="/")


def _new_text(seen: str, text: str) -> str:
    """What ``text`` (a job's logs now) adds to ``seen`` (its logs before); the server keeps only their tail."""
    if text.startswith(seen):
        return text[len(seen) :]
    tail = seen[-2000:]
    at = text.rfind(tail) if tail else -1
    return text[at + len(tail) :] if at >= 0 else text


def _key(name: str) -> Callable[[Mapping[str, object]], object]:
    return lambda answer: answer[name]


def _text(answer: object) -> str:
    return answer.decode() if isinstance(answer, bytes) else str(answer or "")


class _Routes:
    """One method per route, written once: ``Client`` runs them, ``AsyncClient`` returns coroutines.

    Return annotations are those of :class:`Client`; on :class:`AsyncClient` each method returns
    an awaitable of the same type.
    """

    def __init__(self, url: str, token: str | None, retries: int) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self.urls:
            raise ValueError("the client needs the control plane's URL (several replicas: URLs joined by commas)")
        self._at = 0  # the replica that answered last
        self.token: str | None = (token if token is not None else os.environ.get("ROCKROLL_TOKEN", "")) or None
        self.retries = retries
        self._auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def url(self) -> str:
        """The control plane's URL (of several replicas: the one that answered last)."""
        return self.urls[self._at]

    def _transport_retries(self) -> int:
        """Connect retries of the transport: none with several replicas (the next one is tried instead)."""
        return self.retries if len(self.urls) == 1 else 0

    def _retry(self, method: str, idempotent: bool = False) -> dict[str, Any]:
        """How a request is retried beyond the transport's connect retries (see the module docstring)."""
        resend = idempotent or method.upper() in IDEMPOTENT_METHODS
        return {"retry_on": _DROPPED if resend else (), "attempts": self.retries + 1}

    def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------ health
    def health(self) -> Health:
        """Server status and sandbox counts (no token needed)."""
        return self._call("GET", "/v1/health")

    def metrics(self) -> str:
        """Prometheus text."""
        return self._call("GET", "/metrics", post=_text)

    def overview(self) -> Overview:
        """Everything the /ui page shows."""
        return self._call("GET", "/v1/overview")

    def alerts(self, *, resolved: bool = True) -> list[Alert]:
        """Firing alerts the caller may see (theirs and platform-wide ones), then (``resolved``) recent resolved ones."""
        return self._call("GET", "/v1/alerts", post=lambda a: a["alerts"], params={"resolved": resolved})

    # -------------------------------------------------------------- envs
    def list_envs(self, tag: str | None = None) -> list[EnvInfo]:
        """Built-in and custom envs, optionally only those with ``tag``."""
        return self._call("GET", "/v1/envs", post=_key("envs"), params={"tag": tag} if tag else None)

    def get_env(self, name: str) -> EnvInfo:
        """One env's spec, by its exact id (a custom env's is namespaced: ``alice/Maze-v0``)."""
        return self._call("GET", f"/v1/envs/{_env_path(name)}")

    def register_env(
        self,
        env_id: str,
        *,
        kind: str = "source",
        entry_point: str,
        source: str | Path | bytes | None = None,
        source_name: str = "",
        visibility: str = "private",
        **fields: object,
    ) -> EnvInfo:
        """Register a custom env; ``source`` is a path to a ``.py``/``.whl`` or the bytes of one.

        The env lands in the caller's namespace: ``Maze-v0`` registered by alice answers with id
        ``alice/Maze-v0``, the id to use from then on. ``visibility="public"`` shares it with every owner.
        """
        body = _env_body(env_id, kind, entry_point, source, source_name, visibility=visibility, **fields)
        return self._call("POST", "/v1/envs", json=body)

    def delete_env(self, name: str) -> None:
        """Delete a custom env (its exact, namespaced id)."""
        return self._call("DELETE", f"/v1/envs/{_env_path(name)}")

    # --------------------------------------------------------- sandboxes
    def create_sandbox(self, **spec: object) -> SandboxInfo:
        """Start a sandbox (fields of ``SandboxCreate``)."""
        return self._call("POST", "/v1/sandboxes", json=spec)

    def list_sandboxes(self) -> list[SandboxInfo]:
        """The caller's sandboxes."""
        return self._call("GET", "/v1/sandboxes", post=_key("sandboxes"))

    def get_sandbox(self, sandbox_id: str) -> SandboxInfo:
        """One sandbox."""
        return self._call("GET", f"/v1/sandboxes/{sandbox_id}")

    def delete_sandbox(self, sandbox_id: str) -> None:
        """Stop and remove a sandbox."""
        return self._call("DELETE", f"/v1/sandboxes/{sandbox_id}")

    def restart_sandbox(self, sandbox_id: str) -> SandboxInfo:
        """Replace a sandbox under the same id."""
        return self._call("POST", f"/v1/sandboxes/{sandbox_id}/restart")

    def exec(self, sandbox_id: str, cmd: str | list[str], **kwargs: object) -> ExecOutput:
        """Run a command; returns ``{exit_code, stdout, stderr, timed_out, ...}``."""
        return self._call("POST", f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": cmd, **kwargs})

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """A file's bytes from the sandbox workspace."""
        return self._call("GET", f"/v1/sandboxes/{sandbox_id}/files", post=lambda a: a or b"", params={"path": path})

    def write_file(self, sandbox_id: str, path: str, data: bytes | str) -> FileWritten:
        """Write bytes to the sandbox workspace."""
        raw = data.encode() if isinstance(data, str) else data
        return self._call("PUT", f"/v1/sandboxes/{sandbox_id}/files", params={"path": path}, content=raw)

    # ---------------------------------------------------------- sessions
    def create_session(
        self,
        env: str,
        kwargs: Mapping[str, object] | None = None,
        *,
        group: str = "",
        avoid_nodes: list[str] | None = None,
    ) -> SessionOpened:
        """Open a session; returns ``{id, sandbox_id, env, system_prompt}`` (and ``data_plane`` where a node
        agent serves it). ``group``: its rollout group, spread over node agents; ``avoid_nodes``: agents to
        stay off when another has room."""
        body: dict[str, object] = {"env": env, "kwargs": kwargs or {}}
        if group:
            body["group"] = group
        if avoid_nodes:
            body["avoid_nodes"] = list(avoid_nodes)
        key = {"Idempotency-Key": secrets.token_hex(16)}  # so a dropped open is resent without a second session
        return self._call("POST", "/v1/sessions", json=body, headers=key, idempotent=True)

    def list_sessions(self) -> list[SessionInfo]:
        """The caller's open sessions."""
        return self._call("GET", "/v1/sessions", post=_key("sessions"))

    def get_session(self, session_id: str) -> SessionInfo:
        """One session."""
        return self._call("GET", f"/v1/sessions/{session_id}")

    def reset(
        self, session_id: str, seed: int | None = None, options: Mapping[str, object] | None = None
    ) -> ResetResult:
        """Returns ``{observation, info}``."""
        return self._call("POST", f"/v1/sessions/{session_id}/reset", json={"seed": seed, "options": options})

    def step(self, session_id: str, action: Action) -> StepResult:
        """Returns ``{observation, reward, terminated, truncated, info}``; ``action``: the agent's text, or a turn
        with tool calls (a :class:`~rockroll.envs.tools.ToolAction`)."""
        return self._call("POST", f"/v1/sessions/{session_id}/step", json={"action": action_to_wire(action)})

    def step_many(
        self, actions: Mapping[str, Action], resets: dict[str, int | None] | None = None
    ) -> list[dict[str, Any]]:
        """One step on each session of ``{session_id: action}`` in one request (results in order).

        Sessions in ``resets`` (``{session_id: seed}``) are reset instead, after the steps.
        """
        steps: list[dict[str, object]] = [{"id": k, "action": action_to_wire(v)} for k, v in actions.items()]
        steps += [{"id": k, "op": "reset", "seed": seed} for k, seed in (resets or {}).items()]
        return self._call("POST", "/v1/sessions/step", post=_key("results"), json={"steps": steps})

    def actions(self, session_id: str) -> list[str]:
        """Legal actions now, as answer text."""
        return self._call("GET", f"/v1/sessions/{session_id}/actions", post=_key("actions"))

    def fork(self, session_id: str) -> SessionOpened:
        """A new session continuing from this one."""
        return self._call("POST", f"/v1/sessions/{session_id}/fork")

    def session_token(self, session_id: str) -> DataPlaneToken:
        """A fresh data-plane token: ``{"data_plane": {"endpoint", "node", "token", "expires_at"}}`` (404 when none)."""
        return self._call("POST", f"/v1/sessions/{session_id}/token")

    def get_state(self, session_id: str) -> dict[str, Any]:
        """The session env's snapshot."""
        return self._call("GET", f"/v1/sessions/{session_id}/state", post=_key("state"))

    def set_state(self, session_id: str, state: Mapping[str, object]) -> None:
        """Restore a snapshot."""
        return self._call("PUT", f"/v1/sessions/{session_id}/state", json={"state": state})

    def close_session(self, session_id: str) -> None:
        """Close a session. Resent when its connection drops (closing twice closes once; the resend may
        then answer 404): a close cut off by a replica's death would otherwise leave the session open."""
        return self._call("DELETE", f"/v1/sessions/{session_id}", idempotent=True)

    # -------------------------------------------------------------- jobs
    def create_job(self, kind: str, config: Mapping[str, object]) -> JobInfo:
        """Queue a job (``train`` or ``eval``)."""
        return self._call("POST", "/v1/jobs", json={"kind": kind, "config": config})

    def train(
        self,
        config: Mapping[str, object] | None = None,
        *,
        overrides: list[str] | None = None,
        config_path: str | None = None,
    ) -> JobInfo:
        """Queue a ``train`` job: ``config`` (a ``TrainConfig`` mapping, the YAML's content), then ``overrides``
        (``["key=value", ...]``); ``config_path`` names a YAML on the server the mapping merges over.
        A bad key answers 400 ``invalid_job`` naming it."""
        body: dict[str, object] = dict(config or {})
        if overrides:
            body["overrides"] = list(overrides)
        if config_path is not None:
            body["config_path"] = config_path
        return self.create_job("train", body)

    def job_metrics(self, job_id: str) -> dict[str, Any]:
        """A job's latest metrics (``{}`` before its first report)."""
        return self._call("GET", f"/v1/jobs/{job_id}", post=lambda job: dict(job.get("metrics") or {}))

    def list_jobs(self, limit: int = 100) -> list[JobInfo]:
        """Recent jobs."""
        return self._call("GET", "/v1/jobs", post=_key("jobs"), params={"limit": limit})

    def get_job(self, job_id: str) -> JobInfo:
        """One job."""
        return self._call("GET", f"/v1/jobs/{job_id}")

    def job_logs(self, job_id: str) -> str:
        """A job's logs."""
        return self._call("GET", f"/v1/jobs/{job_id}/logs", post=_text)

    def cancel_job(self, job_id: str) -> JobInfo:
        """Cancel a job."""
        return self._call("POST", f"/v1/jobs/{job_id}/cancel")
