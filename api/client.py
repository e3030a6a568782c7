"""Python SDK of the control plane (httpx): :class:`Client`, :class:`AsyncClient` and :class:`RemoteEnv`.

``Client(url, token)`` has one typed method per route; connection errors are retried with
exponential backoff (``retries`` times), HTTP errors raise :class:`ApiClientError` carrying the
server's ``code``, ``message`` and ``details``. :class:`RemoteEnv` is the text-env contract of
:mod:`rockroll.envs.core` over HTTP (a ``gymnasium.Env``), so agents and rollout code run unchanged
against a remote session.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from pathlib import Path
from typing import Any

import httpx

from rockroll.api.client_types import (
    EnvInfo,
    ExecOutput,
    Health,
    JobInfo,
    ResetResult,
    SandboxInfo,
    SessionInfo,
    StepResult,
)

__all__ = ["Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv"]

_RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)


class ApiClientError(Exception):
    """An error answer of the API."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class SandboxLostError(ApiClientError):
    """The session's sandbox died (``sandbox_lost``): open a new session."""


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        err = resp.json()["error"]
        code, message, details = err["code"], err["message"], err.get("details") or {}
    except (ValueError, KeyError, TypeError):
        code, message, details = "http_error", resp.text[:500], {}
    cls = SandboxLostError if code == "sandbox_lost" else ApiClientError
    raise cls(resp.status_code, code, message, details)


def _decode(resp: httpx.Response) -> Any:
    _raise_for(resp)
    if resp.status_code == 204 or not resp.content:
        return None
    if resp.headers.get("content-type", "").startswith("application/json"):
        return resp.json()
    return resp.content


def _env_body(
    env_id: str, kind: str, entry_point: str, source: str | Path | bytes | None, source_name: str, **fields: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"id": env_id, "kind": kind, "entry_point": entry_point, **fields}
    if source is not None:
        if isinstance(source, (str, Path)):
            path = Path(source)
            source_name = source_name or path.name
            source = path.read_bytes()
        body["source_b64"] = base64.b64encode(source).decode()
        body["source_name"] = source_name
    return body


def _key(name: str) -> Any:
    return lambda answer: answer[name]


def _text(answer: Any) -> str:
    return answer.decode() if isinstance(answer, bytes) else str(answer or "")


class _Routes:
    """One method per route, written once: ``Client`` runs them, ``AsyncClient`` returns coroutines.

    Return annotations are those of :class:`Client`; on :class:`AsyncClient` each method returns
    an awaitable of the same type.
    """

    def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------ health
    def health(self) -> Health:
        """Server status and sandbox counts (no token needed)."""
        return self._call("GET", "/v1/health")

    def metrics(self) -> str:
        """Prometheus text."""
        return self._call("GET", "/metrics", post=_text)

    def overview(self) -> dict[str, Any]:
        """Everything the /ui page shows."""
        return self._call("GET", "/v1/overview")

    # -------------------------------------------------------------- envs
    def list_envs(self, tag: str | None = None) -> list[EnvInfo]:
        """Built-in and custom envs, optionally only those with ``tag``."""
        return self._call("GET", "/v1/envs", post=_key("envs"), params={"tag": tag} if tag else None)

    def get_env(self, name: str) -> EnvInfo:
        """One env's spec."""
        return self._call("GET", f"/v1/envs/{name}")

    def register_env(
        self,
        env_id: str,
        *,
        kind: str = "source",
        entry_point: str,
        source: str | Path | bytes | None = None,
        source_name: str = "",
        **fields: Any,
    ) -> EnvInfo:
        """Register a custom env; ``source`` is a path to a ``.py``/``.whl`` or the bytes of one."""
        return self._call("POST", "/v1/envs", json=_env_body(env_id, kind, entry_point, source, source_name, **fields))

    def delete_env(self, name: str) -> None:
        """Delete a custom env."""
        return self._call("DELETE", f"/v1/envs/{name}")

    # --------------------------------------------------------- sandboxes
    def create_sandbox(self, **spec: Any) -> SandboxInfo:
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

    def exec(self, sandbox_id: str, cmd: str | list[str], **kwargs: Any) -> ExecOutput:
        """Run a command; returns ``{exit_code, stdout, stderr, timed_out, ...}``."""
        return self._call("POST", f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": cmd, **kwargs})

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """A file's bytes from the sandbox workspace."""
        return self._call("GET", f"/v1/sandboxes/{sandbox_id}/files", post=lambda a: a or b"", params={"path": path})

    def write_file(self, sandbox_id: str, path: str, data: bytes | str) -> dict[str, Any]:
        """Write bytes to the sandbox workspace."""
        raw = data.encode() if isinstance(data, str) else data
        return self._call("PUT", f"/v1/sandboxes/{sandbox_id}/files", params={"path": path}, content=raw)

    # ---------------------------------------------------------- sessions
    def create_session(self, env: str, kwargs: dict[str, Any] | None = None) -> SessionInfo:
        """Open a session; returns ``{id, sandbox_id, env, system_prompt}``."""
        return self._call("POST", "/v1/sessions", json={"env": env, "kwargs": kwargs or {}})

    def list_sessions(self) -> list[SessionInfo]:
        """The caller's open sessions."""
        return self._call("GET", "/v1/sessions", post=_key("sessions"))

    def get_session(self, session_id: str) -> SessionInfo:
        """One session."""
        return self._call("GET", f"/v1/sessions/{session_id}")

    def reset(self, session_id: str, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        """Returns ``{observation, info}``."""
        return self._call("POST", f"/v1/sessions/{session_id}/reset", json={"seed": seed, "options": options})

    def step(self, session_id: str, action: str) -> StepResult:
        """Returns ``{observation, reward, terminated, truncated, info}``."""
        return self._call("POST", f"/v1/sessions/{session_id}/step", json={"action": action})

    def step_many(self, actions: dict[str, str], resets: dict[str, int | None] | None = None) -> list[dict[str, Any]]:
        """One step on each session of ``{session_id: action}`` in one request (results in order).

        Sessions in ``resets`` (``{session_id: seed}``) are reset instead, after the steps.
        """
        steps: list[dict[str, Any]] = [{"id": k, "action": v} for k, v in actions.items()]
        steps += [{"id": k, "op": "reset", "seed": seed} for k, seed in (resets or {}).items()]
        return self._call("POST", "/v1/sessions/step", post=_key("results"), json={"steps": steps})

    def actions(self, session_id: str) -> list[str]:
        """Legal actions now, as answer text."""
        return self._call("GET", f"/v1/sessions/{session_id}/actions", post=_key("actions"))

    def fork(self, session_id: str) -> SessionInfo:
        """A new session continuing from this one."""
        return self._call("POST", f"/v1/sessions/{session_id}/fork")

    def get_state(self, session_id: str) -> dict[str, Any]:
        """The session env's snapshot."""
        return self._call("GET", f"/v1/sessions/{session_id}/state", post=_key("state"))

    def set_state(self, session_id: str, state: dict[str, Any]) -> None:
        """Restore a snapshot."""
        return self._call("PUT", f"/v1/sessions/{session_id}/state", json={"state": state})

    def close_session(self, session_id: str) -> None:
        """Close a session."""
        return self._call("DELETE", f"/v1/sessions/{session_id}")

    # -------------------------------------------------------------- jobs
    def create_job(self, kind: str, config: dict[str, Any]) -> JobInfo:
        """Queue a job (``train`` or ``eval``)."""
        return self._call("POST", "/v1/jobs", json={"kind": kind, "config": config})

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


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("ROCKROLL_TOKEN", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


class Client(_Routes):
    """Synchronous client. ``Client(url, token)``; ``token`` defaults to ``$ROCKROLL_TOKEN``."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        *,
        timeout_s: float = 120.0,
        retries: int = 5,
        backoff_s: float = 0.1,
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request (retrying connection errors with backoff) and decode the answer."""
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                return _decode(self._http.request(method, path, **kwargs))
            except _RETRYABLE:
                if attempt == self.retries:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        answer = self.request(method, path, **kwargs)
        return post(answer) if post is not None else answer

    def wait_job(self, job_id: str, timeout_s: float = 120.0, poll_s: float = 0.2) -> JobInfo:
        """Poll until the job is succeeded, failed or cancelled (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get_job(job_id)
            if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
                return job
            time.sleep(poll_s)

    def env(self, env: str, **kwargs: Any) -> RemoteEnv:
        """A :class:`RemoteEnv` on a new session of ``env``."""
        return RemoteEnv(self, env, **kwargs)


class AsyncClient(_Routes):
    """Asynchronous client: the same methods as :class:`Client`, each returning a coroutine."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        *,
        timeout_s: float = 120.0,
        retries: int = 5,
        backoff_s: float = 0.1,
        max_connections: int = 256,
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout_s, limits=limits)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request (retrying connection errors with backoff) and decode the answer."""
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                return _decode(await self._http.request(method, path, **kwargs))
            except _RETRYABLE:
                if attempt == self.retries:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        answer = await self.request(method, path, **kwargs)
        return post(answer) if post is not None else answer


from rockroll.api.remote_env import RemoteEnv  # noqa: E402 - RemoteEnv uses Client
