"""The in-sandbox server's WebSocket channel: the same ops as the HTTP socket, one message per call.

The node agent's data plane steps env sessions here (:mod:`rockroll.sandbox.node.channel`): one
WebSocket per session over a second unix socket next to the HTTP one (``s.sock`` ->
``s.ws.sock``), served by the ``websockets`` library's threaded server. A message is
``{"op": "env.step", "args": {...}}`` and its answer ``{"result": ...}`` or ``{"error": {...}}``,
exactly as the HTTP socket answers (:meth:`SandboxServer.dispatch`). The handshake's answer carries
the server's boot id in ``X-Rockroll-Boot``. Measured on 2 cores, a JSON round trip over this
channel costs about half the CPU of one over stdlib ``http.client``/``http.server``.

Each connection holds two server threads (the library's reader and the handler), which count
against a confined sandbox's pids limit (``SandboxSpec.pids_limit``, 256 by default): about 120
sessions of one sandbox can hold a channel at once; past that a new channel is not accepted and the
agent steps that session over the HTTP socket.

The channel is optional: where ``websockets`` is missing (an image built without it) or the path
is too long for a unix socket, the server runs without it and clients use the HTTP socket.

Threat model: the same as the HTTP socket's (:mod:`rockroll.sandbox.server.app`): the socket file
has the same mode and owner; messages are size-capped JSON.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

__all__ = ["channel_path", "serve_channel", "MAX_MESSAGE_BYTES"]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
BOOT_HEADER = "X-Rockroll-Boot"


def channel_path(socket_path: str) -> str:
    """The channel's socket next to the HTTP socket ``socket_path``."""
    return socket_path[: -len(".sock")] + ".ws.sock" if socket_path.endswith(".sock") else socket_path + ".ws"


def serve_channel(socket_path: str, state: Any) -> Any:
    """Start the channel for ``state`` (a ``SandboxServer``) on a daemon thread; None when it cannot run."""
    try:
        from websockets.sync.server import unix_serve
    except ImportError:
        log.info("no websockets library: the channel is off, the HTTP socket serves every call")
        return None
    path = channel_path(socket_path)
    if os.path.exists(path):
        os.unlink(path)

    def handler(ws: Any) -> None:
        for text in ws:
            try:
                msg = json.loads(text)
                op, args = msg["op"], msg.get("args") or {}
                if not isinstance(op, str) or not isinstance(args, dict):
                    raise ValueError("a message is {'op': str, 'args': object}")
            except (ValueError, KeyError, TypeError) as e:
                ws.send(json.dumps({"error": {"type": "BadRequest", "message": str(e), "attrs": {}}}))
                continue
            _status, payload = state.dispatch(op, args)
            ws.send(json.dumps(payload, separators=(",", ":")))

    def add_boot(_conn: Any, _request: Any, response: Any) -> None:
        response.headers[BOOT_HEADER] = state.boot_id

    isolated = state.agents.mode == "uid"
    old = os.umask(0o177 if isolated else 0o111)
    try:
        server = unix_serve(
            handler, path, compression=None, max_size=MAX_MESSAGE_BYTES, process_response=add_boot,
            ping_interval=None,  # a local socket: no keepalive pings, and no keepalive thread per connection
        )  # fmt: skip
    except OSError as e:
        log.warning("the channel cannot listen on %s (%s): the HTTP socket serves every call", path, e)
        return None
    finally:
        os.umask(old)
    owner = os.environ.get("ROCKROLL_SOCKET_UID", "")
    if isolated and owner:
        os.chown(path, int(owner), -1)
    threading.Thread(target=server.serve_forever, name="channel", daemon=True).start()
    return server
