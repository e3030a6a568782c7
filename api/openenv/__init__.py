"""The control plane in OpenEnv's protocol: ``/openenv/<env id>`` serves an env to OpenEnv's own client.

:mod:`~rockroll.api.openenv.face` mounts the app (:func:`mount_openenv`, called by ``create_app``),
:mod:`~rockroll.api.openenv.ws` plays the WebSocket sessions, :mod:`~rockroll.api.openenv.mcp_http` serves a tool
env's tools over MCP (``/mcp``, its JSON-RPC shapes in :mod:`~rockroll.api.openenv.mcp_wire`),
:mod:`~rockroll.api.openenv.wire` holds OpenEnv's frame shapes and :mod:`~rockroll.api.openenv.access` its
authentication. The other direction, an OpenEnv env server played as a rockroll env source, is
:mod:`rockroll.agentrl.sources.openenv`.
"""

from rockroll.api.openenv.face import PREFIX, create_face, mount_openenv

__all__ = ["PREFIX", "create_face", "mount_openenv"]
