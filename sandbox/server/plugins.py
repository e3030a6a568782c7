"""Runs *inside* a sandbox: registers the API's custom envs from the manifests in its workspace.

The control plane starts custom-env sandboxes with ``ROCKROLL_ENV_MODULES=rockroll.sandbox.server.plugins``
(the in-sandbox server imports it at start-up) and ``ROCKROLL_ENV_PLUGINS=.rockroll/plugins``
(relative to the server's own folder ``ROCKROLL_SERVER_DIR`` where the backend gives one, which
no agent uid can write, else to the sandbox workspace), then writes one ``<dir>/manifest.json`` per custom env, with
its uploaded module or wheel next to it, through the sandbox's file API. Importing this module
makes ``envhub`` look in that folder whenever an id is not registered yet, so files written after
the server started are found. Uploaded code is imported in the sandbox, never in the control plane.

Where the server changes uids (agent isolation ``uid``), the server itself never imports this
module: each session of a custom env runs in a worker process
(:mod:`rockroll.sandbox.server.env_worker`) as that session's agent uid, and the worker imports it
and, through it, the uploaded code. The server knows custom envs by id only (an id its registry
lacks goes to a worker). ``.rockroll/`` is 0711 and the plugin files 0644, so workers can read them
but no agent uid can list ``.rockroll/`` or write anything under it.

Threat model: the manifests and uploads come from the control plane; the env code is untrusted.
With agent uids it runs as the session's uid with no capabilities (it cannot act as the server or
another session, nor touch the server's socket or files); where the server cannot change uids
(``agent_isolation: none``) it is imported into the server process, with the server's rights, in a
sandbox of its own owner's pool. Agent commands cannot rewrite it: the file calls map
``.rockroll/`` to the server's folder.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import rockroll.envhub as envhub
import rockroll.envhub.registry as registry
from rockroll.envhub.errors import UnknownEnvError

__all__ = ["install", "load_manifests", "plugin_root", "PLUGINS_ENV", "DEFAULT_PLUGIN_DIR"]

PLUGINS_ENV = "ROCKROLL_ENV_PLUGINS"
DEFAULT_PLUGIN_DIR = ".rockroll/plugins"


def plugin_root() -> str:
    """The plugin folder: ``$ROCKROLL_ENV_PLUGINS``, relative paths taken from the server's folder
    (``$ROCKROLL_SERVER_DIR``) or else the workspace."""
    root = os.environ.get(PLUGINS_ENV, "")
    if not root or os.path.isabs(root):
        return root
    if os.environ.get("ROCKROLL_SERVER_DIR"):
        return os.path.join(os.environ["ROCKROLL_SERVER_DIR"], root)
    workspace = os.environ.get("ROCKROLL_WORKSPACE", "")
    argv = list(sys.argv)
    if "--workspace" in argv[:-1]:
        workspace = argv[argv.index("--workspace") + 1]
    return os.path.join(workspace or os.getcwd(), root)


def load_manifests(root: str) -> int:
    """Register every manifest under ``root`` not registered yet; return how many were added."""
    added = 0
    for path in sorted(Path(root).glob("*/manifest.json")):
        try:
            m = json.loads(path.read_text())
            env_id = m["id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if env_id in registry._REGISTRY:
            continue
        for p in m.get("paths", []):
            full = str((path.parent / p).resolve())
            if full not in sys.path:
                sys.path.insert(0, full)
        try:
            envhub.register(
                env_id, m["entry_point"], kwargs=m.get("kwargs") or {}, max_steps=m.get("max_steps"), tags=("custom",)
            )
        except (KeyError, ValueError) as e:
            print(f"rockroll: skipping env manifest {path}: {e}", file=sys.stderr)
            continue
        added += 1
    return added


def install(root: str | None = None) -> None:
    """Make ``envhub`` look up unknown ids in the plugin folder (idempotent)."""
    root = root or plugin_root()
    if not root:
        return
    if getattr(registry.spec, "_rockroll_plugins", False):
        return
    original = registry.spec

    lock = threading.Lock()

    def spec(env_id: str) -> registry.EnvSpec:
        try:
            return original(env_id)
        except UnknownEnvError:
            # one loader at a time; a concurrent call may have registered the id meanwhile, so
            # look again after loading whether or not this call added anything
            with lock:
                load_manifests(root)
            return original(env_id)

    vars(spec)["_rockroll_plugins"] = True  # the mark the check above reads
    registry.spec = spec


install()
