"""Sandbox manager: isolated, health-monitored env servers in Docker containers or processes.

Usage (no HTTP needed)::

    from rockroll.sandbox import SandboxManager
    with SandboxManager() as m:                      # Docker if a daemon + image, else processes
        env = m.open_session("FrozenLake-v0")        # the text-env contract, plus fork()
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("<answer>Right</answer>")
        sb = m.create()                              # or m.acquire(pool) from a warm pool
        result = sb.exec("ls -la", timeout_s=5)      # ExecResult: exit_code, stdout, timed_out...

Isolation, said plainly: the **docker** backend is the boundary for untrusted code (no network,
read-only root, non-root, no capabilities, CPU/memory/pids limits). The **process** backend uses
bubblewrap (read-only host filesystem, no network, new namespaces) or ``unshare`` where available,
but has no CPU, memory or pids limits and leaves host files readable: use it for trusted code or
where Docker is missing. Build the image with ``rockroll image build`` (works offline).

``import rockroll.sandbox`` stays light (the in-sandbox server imports this package inside images that have
neither SQLAlchemy nor the Docker SDK); the manager and backends load on first use.
"""

from __future__ import annotations

if __name__ != "rockroll.sandbox":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.sandbox, not {__name__}: rockroll's packages live in the rockroll namespace")

import importlib

__all__ = [
    "SandboxManager",
    "ManagerConfig",
    "PoolConfig",
    "WarmPoolConfig",
    "SandboxSpec",
    "ExecResult",
    "Health",
    "SandboxState",
    "RemoteSession",
    "ProcessBackend",
    "DockerBackend",
    "BackendConfig",
    "backend_names",
    "make_backend",
    "register_backend",
    "ManagerBusy",
    "exit_on_sigterm",
]

_LAZY = {
    "SandboxManager": "rockroll.sandbox.manager",
    "ManagerConfig": "rockroll.sandbox.manager",
    "PoolConfig": "rockroll.sandbox.pool",
    "WarmPoolConfig": "rockroll.sandbox.pool",
    "SandboxSpec": "rockroll.sandbox.base",
    "ExecResult": "rockroll.sandbox.base",
    "Health": "rockroll.sandbox.base",
    "SandboxState": "rockroll.sandbox.managed",
    "RemoteSession": "rockroll.sandbox.session",
    "ProcessBackend": "rockroll.sandbox.process",
    "DockerBackend": "rockroll.sandbox.docker_backend",
    "BackendConfig": "rockroll.sandbox.backends",
    "backend_names": "rockroll.sandbox.backends",
    "make_backend": "rockroll.sandbox.backends",
    "register_backend": "rockroll.sandbox.backends",
    "ManagerBusy": "rockroll.sandbox.lease",
    "exit_on_sigterm": "rockroll.sandbox.shutdown",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
