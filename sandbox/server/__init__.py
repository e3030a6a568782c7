"""The in-sandbox server: one per sandbox, hosting env sessions, commands and workspace files.

Run it as ``python -m sandbox.server --socket PATH --workspace DIR``. It depends only on the
standard library and rockroll's envs (numpy, gymnasium), so sandbox images stay small.
"""

from rockroll.sandbox.server.app import SandboxServer, serve

__all__ = ["SandboxServer", "serve"]
