"""The in-sandbox server: one per sandbox, hosting env sessions, commands and workspace files.

Run it as ``python -m rockroll.sandbox.server --socket PATH --workspace DIR``. Control-plane custom envs
load through :mod:`rockroll.sandbox.server.plugins` (named in ``ROCKROLL_ENV_MODULES``); where the
server runs agents as uids of their own, each custom env session runs in a worker process
(:mod:`rockroll.sandbox.server.env_worker`) as its session's uid, not in the server. It depends only on the
standard library and rockroll's envs (numpy, gymnasium), so sandbox images stay small.
"""

from rockroll.sandbox.server.app import SandboxServer, serve

__all__ = ["SandboxServer", "serve"]
