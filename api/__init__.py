"""The control plane: the HTTP env API (server, sessions, sandboxes, nodes, jobs, /ui).

Subpackages by resource: :mod:`~rockroll.api.server` (app factory, settings, auth, errors, shared
state), :mod:`~rockroll.api.envs`, :mod:`~rockroll.api.sessions`, :mod:`~rockroll.api.sandboxes`,
:mod:`~rockroll.api.nodes`, :mod:`~rockroll.api.jobs`, :mod:`~rockroll.api.ui`; the routers are in
:mod:`~rockroll.api.routes` and the tables in :mod:`~rockroll.api.db`. The client SDK is
:mod:`rockroll.client` (its names are re-exported here) and the command line :mod:`rockroll.cli`.

``import rockroll.api`` stays light (no FastAPI, SQLAlchemy or httpx until asked for); the names below
load on first use.
"""

from __future__ import annotations

if __name__ != "rockroll.api":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.api, not {__name__}: rockroll's packages live in the rockroll namespace")

import importlib

__all__ = ["create_app", "Settings", "Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv"]

_LAZY = {
    "create_app": "rockroll.api.server.app",
    "Settings": "rockroll.api.server.settings",
    "Client": "rockroll.client.sdk",
    "AsyncClient": "rockroll.client.sdk",
    "ApiClientError": "rockroll.client.sdk",
    "SandboxLostError": "rockroll.client.sdk",
    "RemoteEnv": "rockroll.client.remote_env",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
