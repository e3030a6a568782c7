"""Python SDK of the control plane (httpx): :class:`Client` and :class:`AsyncClient`.

``Client(url, token)`` has one typed method per route (the types are the routes' response models,
:mod:`rockroll.client.responses`); ``Client.env(...)`` opens a :class:`~rockroll.client.remote_env.RemoteEnv`,
the text-env contract over HTTP. :class:`AsyncClient` has the same methods as coroutines: both run the
route table of :class:`_Routes` and differ only in how a request is awaited. HTTP errors raise
:class:`ApiClientError` carrying the server's ``code``, ``message`` and ``details``.

``url`` may name several control-plane replicas (URLs joined by commas): a request goes to the one
that answered last, and on to the next when a replica refuses the connection (the request was never
sent, so any method may go on); when all refuse, the round is repeated ``retries`` times with backoff.

Retries (the policy of :mod:`rockroll.sandbox.retry`): a connection error before the request was sent is
retried by the httpx transport (``retries`` times); a connection that drops after sending is resent only
for an idempotent method (:data:`IDEMPOTENT_METHODS`: reads and ``PUT`` of a whole value), for a
session open, which carries an ``Idempotency-Key`` (a resent open answers the session the first one
opened), and for a session close (a second close changes nothing). Another ``POST`` (step, reset, fork...) whose connection drops raises its
``httpx.TransportError``: the server may have applied it, and sending it again could apply it twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx

from rockroll.client.errors import ApiClientError, SandboxLostError
from rockroll.client.job_state import TERMINAL_STATES
from rockroll.client.remote_env import RemoteEnv
from rockroll.client.replicas import RETRIED, Attempts
from rockroll.client.routes import IDEMPOTENT_METHODS, _decode, _new_text, _Routes
from rockroll.client.types import JobInfo
from rockroll.sandbox.retry import Backoff, aretry_call, retry_call

__all__ = ["Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv", "IDEMPOTENT_METHODS"]


class Client(_Routes):
    """Synchronous client. ``Client(url, token)``; ``token`` defaults to ``$ROCKROLL_TOKEN``.

    ``retries``: connection attempts after the first (the transport's), and resends of an idempotent
    request whose connection dropped.
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        *,
        timeout_s: float = 120.0,
        retries: int = 5,
    ) -> None:
        super().__init__(url, token, retries)
        transport = httpx.HTTPTransport(retries=self._transport_retries())
        self.timeout_s = timeout_s  # also each direct (data-plane) call of a RemoteEnv
        self._http = httpx.Client(base_url=self.url, headers=self._auth, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request (retried as the module docstring says) and decode the answer."""
        policy = self._retry(method, kwargs.pop("idempotent", False))
        resend = bool(policy["retry_on"])
        return _decode(retry_call(lambda: self._send(method, path, resend, **kwargs), **policy))

    def _send(self, method: str, path: str, resend: bool = False, **kwargs: Any) -> httpx.Response:
        """One request; with several replicas, to the next one while a replica refuses the connection, or (a
        request safe to resend: ``resend``) leaves it unanswered for the client's timeout
        (:class:`~rockroll.client.replicas.Attempts`)."""
        if len(self.urls) == 1:
            return self._http.request(method, path, **kwargs)
        attempts = Attempts(self, resend)
        for delay_s, url in attempts:
            if delay_s:
                time.sleep(delay_s)  # every replica refused: back off
            try:
                resp = self._http.request(method, url + path, **kwargs)
            except RETRIED as e:
                attempts.failed(e)
                continue
            if attempts.answered(resp):
                return resp
        raise attempts.exhausted()

    def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        answer = self.request(method, path, **kwargs)
        return post(answer) if post is not None else answer

    def wait_job(self, job_id: str, timeout_s: float = 120.0, poll_s: float = 0.2) -> JobInfo:
        """Poll (at most ``poll_s`` apart) until the job succeeded, failed or was cancelled, or ``timeout_s`` passed."""
        for _ in Backoff(timeout_s=timeout_s, max_delay_s=poll_s):
            job = self.get_job(job_id)
            if job["state"] in TERMINAL_STATES:
                break
        return job

    def follow_logs(self, job_id: str, poll_s: float = 1.0, timeout_s: float | None = None) -> Iterator[str]:
        """Yield a job's log text as it grows (what is new since the last yield) until the job ends.

        Ends after the job's last lines once it succeeded, failed or was cancelled; ``timeout_s`` (None:
        no limit) stops following earlier. The job itself keeps running when the caller stops iterating.
        """
        seen = ""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            done = self.get_job(job_id)["state"] in TERMINAL_STATES  # read before the logs: no line is lost
            text = self.job_logs(job_id)
            new = _new_text(seen, text)
            if new:
                yield new
            seen = text
            if done or (deadline is not None and time.monotonic() >= deadline):
                return
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
        max_connections: int = 256,
    ) -> None:
        super().__init__(url, token, retries)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        transport = httpx.AsyncHTTPTransport(retries=self._transport_retries(), limits=limits)
        self.timeout_s = timeout_s  # also each direct (data-plane) call of a RemoteEnv
        self._http = httpx.AsyncClient(base_url=self.url, headers=self._auth, timeout=timeout_s, transport=transport)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request (retried as the module docstring says) and decode the answer."""
        policy = self._retry(method, kwargs.pop("idempotent", False))
        resend = bool(policy["retry_on"])
        return _decode(await aretry_call(lambda: self._send(method, path, resend, **kwargs), **policy))

    async def _send(self, method: str, path: str, resend: bool = False, **kwargs: Any) -> httpx.Response:
        """:meth:`Client._send`, awaited."""
        if len(self.urls) == 1:
            return await self._http.request(method, path, **kwargs)
        attempts = Attempts(self, resend)
        for delay_s, url in attempts:
            if delay_s:
                await asyncio.sleep(delay_s)
            try:
                resp = await self._http.request(method, url + path, **kwargs)
            except RETRIED as e:
                attempts.failed(e)
                continue
            if attempts.answered(resp):
                return resp
        raise attempts.exhausted()

    async def _call(self, method: str, path: str, post: Any = None, **kwargs: Any) -> Any:
        answer = await self.request(method, path, **kwargs)
        return post(answer) if post is not None else answer
