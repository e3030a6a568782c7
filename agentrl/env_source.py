"""Env sources: where env managers get their envs (in-process, sandbox session, or the HTTP API).

An :class:`EnvSource` opens one env for one episode attempt and takes it back afterwards. All
three sources hand out objects with the text-env contract (``reset``, ``step``, ``close``,
``system_prompt``), so env managers run the same code against each:

* :class:`LocalSource`: ``envhub.make`` in this process.
* :class:`SandboxSource`: ``SandboxManager.open_session`` (warm sandboxes are reused: the manager
  places each session on the least-loaded ready sandbox).
* :class:`RemoteSource`: ``RemoteEnv`` over the control plane's HTTP API.
* :class:`CallableSource`: any ``open(env_id, kwargs)`` function (e.g. a job context's placement).

``open``/``close`` block; env managers call them in a thread pool. ``close`` never raises, and
``open_count`` says how many envs are out (the leak check of tests and benches).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["EnvSource", "LocalSource", "SandboxSource", "RemoteSource", "CallableSource"]

log = logging.getLogger(__name__)


class EnvSource:
    """Base class: opens and closes envs, counting those out."""

    name = "base"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open_count = 0
        self.opened = 0

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def open(self, env_id: str, kwargs: dict[str, Any] | None = None) -> Any:
        """A fresh env for one episode attempt (blocking)."""
        env = self._open(env_id, dict(kwargs or {}))
        with self._lock:
            self.open_count += 1
            self.opened += 1
        return env

    def close(self, env: Any) -> None:
        """Give the env back (blocking, never raises)."""
        try:
            env.close()
        except Exception as e:  # noqa: BLE001 - a broken env must not break the rollout
            log.debug("closing %r failed: %s", env, e)
        finally:
            with self._lock:
                self.open_count -= 1


class LocalSource(EnvSource):
    """Envs built in this process with ``envhub.make``."""

    name = "local"

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        import rockroll.envhub as envhub

        return envhub.make(env_id, **kwargs)


class SandboxSource(EnvSource):
    """Env sessions in sandboxes of a :class:`~rockroll.sandbox.manager.SandboxManager`.

    Args:
        manager: the sandbox manager (owned by the caller).
        spec: sandbox spec (pool) to place sessions on; None: the manager's default.
        capacity_wait_s: how long an open waits for a free session slot when the manager is at
            capacity (a full pool is backpressure, not a failure).
    """

    name = "sandbox"

    def __init__(self, manager: Any, spec: Any = None, *, capacity_wait_s: float = 120.0) -> None:
        super().__init__()
        self.manager = manager
        self.spec = spec
        self.capacity_wait_s = capacity_wait_s

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        """Open a session; while every sandbox is full and none may start, wait (backpressure)."""
        from rockroll.sandbox.errors import CapacityError

        deadline = time.monotonic() + self.capacity_wait_s
        delay = 0.02
        while True:
            try:
                return self.manager.open_session(env_id, spec=self.spec, **kwargs)
            except CapacityError:
                if time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class RemoteSource(EnvSource):
    """Sessions of the control plane through :class:`rockroll.api.client.RemoteEnv`.

    Args:
        client: an ``api.client.Client`` (owned by the caller).
    """

    name = "remote"

    def __init__(self, client: Any) -> None:
        super().__init__()
        self.client = client

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        from rockroll.api.remote_env import RemoteEnv

        return RemoteEnv(self.client, env_id, **kwargs)


class CallableSource(EnvSource):
    """Envs from a function ``open_fn(env_id, kwargs)`` (closed with their own ``close``)."""

    name = "callable"

    def __init__(self, open_fn: Any) -> None:
        super().__init__()
        self.open_fn = open_fn

    def _open(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        return self.open_fn(env_id, kwargs)
