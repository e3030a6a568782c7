"""The warm pool: started, healthy sandboxes that belong to nobody yet, handed out by ``create``.

A Docker sandbox costs seconds of CPU to start (``docker create`` and ``start``, the shim and runc,
the server's Python start-up: bench/sandboxes/docker_burst.py), so a burst of creates on a small machine
waits for all of them. The manager (:class:`~rockroll.sandbox.manager.SandboxManager`) keeps
``WarmPoolConfig.size`` started sandboxes per spec instead, and ``create(spec)`` takes one:

* **keyed by what the container is made of**: every spec field but ``name`` and
  ``startup_timeout_s`` (:func:`warm_key`), so specs that differ only in their pool name share the
  warm sandboxes; the handed-out sandbox takes the caller's spec and pool;
* **checked before hand-out**: a ``health`` answer from its server, with the boot id it had when
  it became warm, within ``handout_timeout_s``; one that fails (it died while idle, its server
  was replaced) is stopped and never handed out, and the next one is tried;
* **refilled in the background**: a thread starts up to ``refill_concurrency`` sandboxes at once
  until each spec has ``size`` idle or starting, never more than ``max_total`` over all specs; a
  start that fails backs off (up to a minute) before that spec is tried again; idle ones are
  probed every ``check_interval_s`` and the dead ones replaced;
* **preloaded**: with ``preload_envs`` a warm sandbox's server imports the env registry while it
  waits (``ROCKROLL_PRELOAD_ENVS``, :mod:`rockroll.sandbox.server.sessions`), so its first session
  opens as fast as its later ones;
* **never adopted**: a warm sandbox has no record in the store until handed out, so a restarted
  manager's reconciliation (:mod:`rockroll.sandbox.reconcile`) removes the warm sandboxes of its
  previous run; ``close`` stops them.

Threat model: a warm sandbox is started by the same backend call, with the same isolation, as a
cold one (for Docker: read-only root, no network, capabilities dropped, a random agent uid of its
own); until hand-out its server has answered nothing but ``health``, so no caller's code or data
has been in it. Whoever is handed one gets a sandbox nobody else was handed.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rockroll.sandbox.base import SandboxBackend, SandboxHandle, SandboxSpec
from rockroll.sandbox.errors import SandboxError
from rockroll.sandbox.pool import WarmPoolConfig
from rockroll.sandbox.results import Health
from rockroll.sandbox.server.sessions import PRELOAD_ENV

__all__ = ["WarmPool", "WarmSandbox", "warm_key"]

log = logging.getLogger(__name__)

#: the longest wait before a spec whose warm starts keep failing is tried again (seconds)
MAX_BACKOFF_S = 60.0


def warm_key(spec: SandboxSpec) -> SandboxSpec:
    """The spec a warm sandbox of ``spec`` is started with, minus what does not shape the sandbox."""
    return spec.model_copy(update={"name": "warm", "startup_timeout_s": SandboxSpec().startup_timeout_s})


@dataclass
class WarmSandbox:
    """One idle warm sandbox: its id (kept after hand-out), handle, first health answer and pool key."""

    sandbox_id: str
    handle: SandboxHandle
    health: Health | None
    key: SandboxSpec


class WarmPool:
    """Started sandboxes per :func:`warm_key` (see the module docstring).

    Args:
        config: sizes and timings.
        backend: starts and stops the sandboxes.
        labels: the labels of a new sandbox of this id and spec (the manager's, generation 0).
        specs: the specs kept warm.
    """

    def __init__(
        self,
        config: WarmPoolConfig,
        backend: SandboxBackend,
        labels: Callable[[str, SandboxSpec], dict[str, str]],
        specs: Iterable[SandboxSpec],
    ) -> None:
        self.config = config
        self.backend = backend
        self._labels = labels
        self._specs: dict[SandboxSpec, SandboxSpec] = {}  # key -> the spec its sandboxes start with
        for spec in specs:
            key = warm_key(spec)
            env = dict(key.env) | ({PRELOAD_ENV: "1"} if config.preload_envs else {})
            self._specs.setdefault(key, key.model_copy(update={"env": tuple(sorted(env.items()))}))
        self._idle: dict[SandboxSpec, deque[WarmSandbox]] = {k: deque() for k in self._specs}
        self._starting = dict.fromkeys(self._specs, 0)
        self._retry_at = dict.fromkeys(self._specs, 0.0)
        self._failures = dict.fromkeys(self._specs, 0)
        self.counts = {"started": 0, "handed_out": 0, "dead": 0, "failed": 0}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._workers = ThreadPoolExecutor(config.refill_concurrency, thread_name_prefix="sandbox-warm")

    @property
    def enabled(self) -> bool:
        return self.config.size > 0 and bool(self._specs)

    def start(self) -> None:
        """Start refilling in the background (a no-op when ``size`` is 0)."""
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sandbox-warm-pool", daemon=True)
            self._thread.start()

    def idle(self, spec: SandboxSpec | None = None) -> int:
        """Idle warm sandboxes (of ``spec``'s key, or of all)."""
        with self._lock:
            if spec is not None:
                return len(self._idle.get(warm_key(spec), ()))
            return sum(len(q) for q in self._idle.values())

    def stats(self) -> dict[str, Any]:
        """Idle and starting sandboxes now, and what happened so far (started, handed out, dead, failed)."""
        with self._lock:
            idle = sum(len(q) for q in self._idle.values())
            return {"idle": idle, "starting": sum(self._starting.values()), **self.counts}

    # ------------------------------------------------------------ hand-out
    def take(self, spec: SandboxSpec) -> WarmSandbox | None:
        """An idle warm sandbox of ``spec`` that answers its health check now, or None (none idle)."""
        key = warm_key(spec)
        while True:
            with self._lock:
                queue = self._idle.get(key)
                if self._closed or not queue:
                    return None
                warm = queue.popleft()  # the oldest: it had the longest to preload
            self._wake.set()  # refill
            if self._answers(warm):
                with self._lock:
                    self.counts["handed_out"] += 1
                return warm
            self._discard(warm, "it died while idle")

    def give_back(self, warm: WarmSandbox) -> None:
        """Return a sandbox :meth:`take` gave that its caller could not use (it stays warm)."""
        with self._lock:
            queue = self._idle.get(warm.key)
            if not self._closed and queue is not None:
                queue.appendleft(warm)
                return
        self._stop(warm)

    def _answers(self, warm: WarmSandbox) -> bool:
        """Whether ``warm``'s server answers now, and is the one that became warm."""
        try:
            health = self.backend.health(warm.handle, timeout_s=self.config.handout_timeout_s)
        except SandboxError:
            return False
        return health.boot_id == warm.handle.boot_id

    def _discard(self, warm: WarmSandbox, why: str) -> None:
        log.warning("dropping warm sandbox %s: %s", warm.sandbox_id, why)
        with self._lock:
            self.counts["dead"] += 1
        try:
            self._workers.submit(self._stop, warm)
        except RuntimeError:  # closing: stop it here
            self._stop(warm)

    def _stop(self, warm: WarmSandbox) -> None:
        try:
            self.backend.stop(warm.handle)
        except Exception as e:  # noqa: BLE001 - reconciliation removes it later
            log.warning("cannot stop warm sandbox %s: %s", warm.sandbox_id, e)

    # ------------------------------------------------------------ refill
    def _run(self) -> None:
        next_check = time.monotonic() + self.config.check_interval_s
        while not self._closed:
            try:
                self._refill()
                if time.monotonic() >= next_check:
                    self._check_idle()
                    next_check = time.monotonic() + self.config.check_interval_s
            except Exception:  # noqa: BLE001 - the refill must survive anything
                log.exception("warm pool refill failed")
            self._wake.wait(max(0.05, min(self.config.check_interval_s, next_check - time.monotonic())))
            self._wake.clear()

    def _refill(self) -> None:
        """Start what each spec lacks, within ``size`` per spec and ``max_total`` in all."""
        now = time.monotonic()
        with self._lock:
            total = sum(len(q) for q in self._idle.values()) + sum(self._starting.values())
            for key, spec in self._specs.items():
                if self._closed or now < self._retry_at[key]:
                    continue
                missing = self.config.size - len(self._idle[key]) - self._starting[key]
                for _ in range(max(0, min(missing, self.config.max_total - total))):
                    self._starting[key] += 1
                    total += 1
                    self._workers.submit(self._start_one, key, spec)

    def _start_one(self, key: SandboxSpec, spec: SandboxSpec) -> None:
        sandbox_id = f"sb-{secrets.token_hex(6)}"
        handle = None
        try:
            handle = self.backend.start(sandbox_id, spec, labels=self._labels(sandbox_id, spec))
            health = self.backend.wait_ready(handle, spec.startup_timeout_s)
        except Exception as e:  # noqa: BLE001 - counted, backed off, tried again
            if handle is not None:
                self._stop(WarmSandbox(sandbox_id, handle, None, key))
            with self._lock:
                self._starting[key] -= 1
                self._failures[key] += 1
                self.counts["failed"] += 1
                delay = min(MAX_BACKOFF_S, 0.5 * 2 ** self._failures[key])
                self._retry_at[key] = time.monotonic() + delay
            log.warning("a warm sandbox failed to start (%s); retrying in %.1f s", e, delay)
            return
        warm = WarmSandbox(sandbox_id, handle, health, key)
        with self._lock:
            self._starting[key] -= 1
            self._failures[key] = 0
            self.counts["started"] += 1
            if not self._closed:
                self._idle[key].append(warm)
                return
        self._stop(warm)  # closed while it started

    def _check_idle(self) -> None:
        """Probe every idle warm sandbox; stop (and so replace) those that do not answer."""
        with self._lock:
            snapshot = [(key, w) for key, q in self._idle.items() for w in q]
        for key, warm in snapshot:
            if self._answers(warm):
                continue
            with self._lock:
                queue = self._idle[key]
                if warm not in queue:  # handed out meanwhile (its hand-out check decides)
                    continue
                queue.remove(warm)
            self._discard(warm, "it stopped answering while idle")
        self._wake.set()

    # ------------------------------------------------------------- close
    def close(self) -> None:
        """Stop refilling and stop every warm sandbox (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._workers.shutdown(wait=True, cancel_futures=True)  # running starts stop their own sandbox
        with self._lock:
            left = [w for q in self._idle.values() for w in q]
            for q in self._idle.values():
                q.clear()
        for warm in left:
            self._stop(warm)
