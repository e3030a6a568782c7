"""The control plane: HTTP env API, client SDK and the ``rockroll`` command line.

``import api`` stays light (the in-sandbox server imports :mod:`api.sandbox_plugins` inside images
without FastAPI or SQLAlchemy); the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["create_app", "Settings", "Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv"]

_LAZY = {
    "create_app": "api.app",
    "Settings": "api.settings",
    "Client": "api.client",
    "AsyncClient": "api.client",
    "ApiClientError": "api.client",
    "SandboxLostError": "api.client",
    "RemoteEnv": "api.remote_env",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'api' has no attribute {name!r}")
