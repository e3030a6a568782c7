"""The client SDK of the control plane: :class:`Client`, :class:`AsyncClient`, :class:`RemoteEnv`.

The layer between the rollout (``agentrl``) and the sandboxes: it speaks the control plane's HTTP API
and imports nothing of the server (``rockroll.api``); the wire types both sides share (the routes'
response models, :mod:`rockroll.client.responses`, and :class:`~rockroll.client.job_state.JobState`)
live here, and the server imports them. ``import rockroll.client`` stays light (no httpx until asked
for); the names below load on first use.
"""

from __future__ import annotations

if __name__ != "rockroll.client":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.client, not {__name__}: rockroll's packages live in the rockroll namespace")

import importlib

__all__ = ["Client", "AsyncClient", "ApiClientError", "SandboxLostError", "RemoteEnv", "JobState"]

_LAZY = {
    "Client": "rockroll.client.sdk",
    "AsyncClient": "rockroll.client.sdk",
    "ApiClientError": "rockroll.client.errors",
    "SandboxLostError": "rockroll.client.errors",
    "RemoteEnv": "rockroll.client.remote_env",
    "JobState": "rockroll.client.job_state",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
