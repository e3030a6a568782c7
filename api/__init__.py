"""The control plane: HTTP env API, client SDK and the ``rockroll`` command line.

``import rockroll.api`` stays light (no FastAPI, SQLAlchemy or httpx until asked for); the names below
load on first use.
"""

from __future__ import annotations

if __name__ != "rockroll.api":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.api, not {__name__}: rockroll's packages live in the rockroll namespace")

import importlib
from typing import Any

__all__ = ["create_app", "Settings", "Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv"]

_LAZY = {
    "create_app": "rockroll.api.app",
    "Settings": "rockroll.api.settings",
    "Client": "rockroll.api.client",
    "AsyncClient": "rockroll.api.client",
    "ApiClientError": "rockroll.api.client",
    "SandboxLostError": "rockroll.api.client",
    "RemoteEnv": "rockroll.api.remote_env",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
