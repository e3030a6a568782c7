"""Sandbox manager: isolated, health-monitored env servers in Docker containers or processes.

Usage (no HTTP needed)::

    from sandbox import SandboxManager
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

``import sandbox`` stays light (the in-sandbox server imports this package inside images that have
neither SQLAlchemy nor the Docker SDK); the manager and backends load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SandboxManager",
    "ManagerConfig",
    "PoolConfig",
    "SandboxSpec",
    "ExecResult",
    "Health",
    "RemoteSession",
    "ProcessBackend",
    "DockerBackend",
]

_LAZY = {
    "SandboxManager": "sandbox.manager",
    "ManagerConfig": "sandbox.manager",
    "PoolConfig": "sandbox.pool",
    "SandboxSpec": "sandbox.base",
    "ExecResult": "sandbox.base",
    "Health": "sandbox.base",
    "RemoteSession": "sandbox.session",
    "ProcessBackend": "sandbox.process",
    "DockerBackend": "sandbox.docker_backend",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
