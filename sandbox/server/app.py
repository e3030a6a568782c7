"""The in-sandbox HTTP server: routes ``POST /<op>`` calls to sessions, commands and files.

Built on the standard library's ``http.server`` with a threading unix-socket server (HTTP/1.1
keep-alive, one thread per connection). The protocol is described in :mod:`rockroll.sandbox.client`;
``POST /adopt`` is a manager's hold on a handed-over sandbox (:mod:`rockroll.sandbox.server.handover`).

Agent code runs apart from the server where the backend allows it
(:mod:`rockroll.sandbox.server.agents`): ``exec`` and the file calls act as the sandbox's agent uid
in the workspace, each env session's agent commands as a uid of its own in a folder of its own, and
paths under ``.rockroll/`` (custom env plugins) are the server's own files, outside every agent's
reach. Custom env code runs in a worker process per session, as that session's uid
(:mod:`rockroll.sandbox.server.worker_env`); only rockroll's own envs run in this process. ``health`` reports ``agent_isolation`` (``uid`` or ``none``), ``server_uid`` and ``agent_uid``.

Threat model: the socket is reachable only by whoever can reach the socket file: the host's
manager. With agent uids the socket is 0600, owned by the server (or by the uid the backend names in
``ROCKROLL_SOCKET_UID``), so no agent command can connect to it or replace it; without them it is
0666 inside a directory private to the manager on the host side, and agent commands run as the
server. Inputs are JSON capped at ``MAX_REQUEST_BYTES`` while they are read (``Content-Length``
checked up front, a chunked body cut at the limit: :func:`rockroll.sandbox.body_limit.read_body`); errors are answered as typed JSON, never
as tracebacks that could crash the server.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from rockroll.envs.json_types import JSONObject, JSONValue
from rockroll.sandbox.body_limit import BodyError, read_body
from rockroll.sandbox.server.agents import Agents
from rockroll.sandbox.server.channel import serve_channel
from rockroll.sandbox.server.execs import run_command
from rockroll.sandbox.server.files import Workspace
from rockroll.sandbox.server.handover import Handover
from rockroll.sandbox.server.sessions import SessionStore
from rockroll.sandbox.server.wire import Answer, error_info

__all__ = ["SandboxServer", "serve", "make_httpd", "MAX_REQUEST_BYTES"]

MAX_REQUEST_BYTES = 32 * 1024 * 1024


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # many clients connect at once (the default backlog of 5 refuses them)

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        sock, _ = self.socket.accept()
        return sock, ("sandbox", 0)


MAX_BATCH = 4096


class SandboxServer:
    """The state of one server: sessions, workspace and the op table."""

    def __init__(self, workspace: str, max_sessions: int = 16, handover: Handover | None = None) -> None:
        self.boot_id = secrets.token_hex(8)
        #: the countdown of a handed-over sandbox (``POST /adopt`` holds it off), None: no handover here
        self.handover = handover
        self.started = time.monotonic()
        self.agents = Agents(workspace, max_sessions)
        self.workspace = Workspace(workspace, self.agents.exec_identity)
        # the server's own files (plugins): apart from the agents' workspace when there is a server dir
        self.own_files = Workspace(self.agents.server_dir) if self.agents.server_dir else self.workspace
        self.sessions = SessionStore(max_sessions, self.agents)
        threading.Thread(target=self.sessions.preload, name="preload", daemon=True).start()
        self.ops: dict[str, Callable[..., object]] = {
            "health": self.health,
            "env.make": lambda env_id, kwargs=None: self.sessions.make(env_id, kwargs),
            "env.reset": self.sessions.reset,
            "env.step": self.sessions.step,
            "env.close": self.sessions.close,
            "env.get_state": self.sessions.get_state,
            "env.set_state": self.sessions.set_state,
            "env.fork": self.sessions.fork,
            "env.action_candidates": self.sessions.action_candidates,
            "env.render": self.sessions.render,
            "env.batch": self.batch,
            "exec": self.exec,
            "files.read": lambda path, max_bytes=16 * 1024 * 1024: {
                "data": base64.b64encode(self._files(path).read(path, max_bytes)).decode()
            },
            "files.write": lambda path, data, mode=0o644: {
                "size": self._files(path).write(path, base64.b64decode(data), mode)
            },
            "files.list": lambda path=".": self._files(path).list(path),
        }

    def _files(self, path: object) -> Workspace:
        """The server's own files for ``.rockroll/...`` (normalised: no ``..`` trick), else the workspace."""
        if isinstance(path, str) and os.path.normpath(path).split(os.sep)[0] == ".rockroll":
            return self.own_files
        return self.workspace

    def health(self) -> JSONObject:
        t = os.times()
        return {
            "boot_id": self.boot_id,
            "sessions": len(self.sessions),
            "max_sessions": self.sessions.max_sessions,
            "cpu_seconds": round(t.user + t.system + t.children_user + t.children_system, 3),
            "memory_bytes": _memory_bytes(),
            "uptime_s": round(time.monotonic() - self.started, 3),
            "pid": os.getpid(),
            "agent_isolation": self.agents.mode,
            "server_uid": os.geteuid(),
            "agent_uid": self.agents.exec_identity.uid if self.agents.exec_identity else os.geteuid(),
        }

    def batch(self, items: list[JSONValue]) -> list[Answer]:
        """Run many ``step``/``reset`` items (any sessions here) in one round trip, in order.

        Each item is ``{"session_id", "op": "step"|"reset", "action" | "seed", "options"}``; each
        answer is ``{"result": ...}`` or ``{"error": {...}}``, so one bad item fails alone.
        """
        if not isinstance(items, list) or len(items) > MAX_BATCH:
            raise ValueError(f"items must be a list of at most {MAX_BATCH} step/reset items")
        out: list[Answer] = []
        for item in items:
            try:
                if not isinstance(item, dict):
                    raise ValueError("each batch item must be an object")
                op, sid = item.get("op", "step"), item["session_id"]
                if op == "step":
                    out.append({"result": self.sessions.step(sid, item["action"])})
                elif op == "reset":
                    out.append({"result": self.sessions.reset(sid, item.get("seed"), item.get("options"))})
                else:
                    raise ValueError(f"batch op must be 'step' or 'reset', got {op!r}")
            except Exception as e:  # noqa: BLE001 - answered per item, typed
                out.append({"error": error_info(e)})
        return out

    def exec(self, cmd: str | list[str], **kwargs: Any) -> JSONObject:
        return run_command(
            cmd, workspace=self.workspace.root, resolve=self.workspace.resolve,
            identity=self.agents.exec_identity, **kwargs,
        )  # fmt: skip

    def dispatch(self, op: str, args: Mapping[str, object]) -> tuple[int, Answer]:
        fn = self.ops.get(op)
        if fn is None:
            return 404, {"error": {"type": "UnknownOp", "message": f"unknown op {op!r}", "attrs": {}}}
        try:
            return 200, {"result": fn(**args)}
        except TypeError as e:
            if type(e) is TypeError and "argument" in str(e):
                return 400, {"error": {"type": "BadRequest", "message": f"{op}: {e}", "attrs": {}}}
            return 200, {"error": error_info(e)}
        except Exception as e:  # noqa: BLE001 - every failure goes back to the caller, typed
            return 200, {"error": error_info(e)}


def _memory_bytes() -> int:
    """This sandbox's memory: its own cgroup's (a Docker container, whose cgroup namespace is its own; a process
    sandbox confined to a cgroup, named in ``ROCKROLL_MEMORY_CGROUP``), else the RSS of this server's process
    tree (a process sandbox without one: the cgroup it sees is the host's, shared with every other sandbox)."""
    own = os.environ.get("ROCKROLL_MEMORY_CGROUP")  # set by rockroll.sandbox.process
    if own:
        paths: tuple[str, ...] = (f"{own}/memory.current", f"{own}/memory.usage_in_bytes")
    elif os.environ.get("ROCKROLL_SOCKET"):  # set by rockroll.sandbox.docker_backend only: a container
        paths = ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes")
    else:
        paths = ()
    for path in paths:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            continue
    return tree_rss(os.getpid())


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and all its descendants (read from ``/proc``; 0 where unreadable)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{entry.path}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            pid = int(entry.name)
            children.setdefault(int(fields[1]), []).append(pid)  # fields[1]: the parent's pid
            rss[pid] = int(fields[21]) * page  # fields[21]: resident pages
        except (OSError, ValueError, IndexError):
            continue
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def _make_handler(server: SandboxServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet by default
            return

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            try:
                raw = read_body(self.rfile, self.headers, MAX_REQUEST_BYTES)
            except BodyError as e:  # the rest of the body stays unread: this connection carries no other request
                self.close_connection = True
                self._send(e.status, {"error": {"type": "BadRequest", "message": str(e), "attrs": {}}})
                return
            try:
                args = json.loads(raw or b"{}")
                if not isinstance(args, dict):
                    raise ValueError("arguments must be a JSON object")
            except (ValueError, RecursionError) as e:
                self._send(400, {"error": {"type": "BadRequest", "message": f"not a JSON object: {e}", "attrs": {}}})
                return
            if self.path == "/adopt":  # a manager takes the sandbox over (rockroll.sandbox.server.handover)
                self._adopt()
                return
            status, payload = server.dispatch(self.path.lstrip("/"), args)
            self._send(status, payload)

        def _adopt(self) -> None:
            """Answer ``{"held": bool}``; when held, count the caller as a holder until its connection ends."""
            h = server.handover
            if h is not None and not h.from_manager(self.connection):
                msg = "only a manager outside the sandbox may adopt it"
                self._send(403, {"error": {"type": "Forbidden", "message": msg, "attrs": {}}})
                return
            held = h is not None and h.timeout_s > 0
            self._send(200, {"result": {"held": held}})
            if h is not None and held:
                self.close_connection = True
                h.hold(self.rfile)

        def _send(self, status: int, payload: Answer) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Rockroll-Boot", server.boot_id)
            self.end_headers()
            self.wfile.write(body)

    return Handler


def make_httpd(socket_path: str, state: SandboxServer) -> socketserver.BaseServer:
    """Bind the server to ``socket_path``: mode 0600 when agents run as other uids (owned by
    ``ROCKROLL_SOCKET_UID`` when set: the host's manager), else 0666 (the directory guards access)."""
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    isolated = state.agents.mode == "uid"
    old = os.umask(0o177 if isolated else 0o111)
    try:
        httpd = _UnixHTTPServer(socket_path, _make_handler(state))
    finally:
        os.umask(old)
    owner = os.environ.get("ROCKROLL_SOCKET_UID", "")
    if isolated and owner:
        os.chown(socket_path, int(owner), -1)
    return httpd


def serve(socket_path: str, workspace: str, max_sessions: int = 16, handover: Handover | None = None) -> None:
    """Serve on ``socket_path`` until the process is killed (``handover``: see :class:`SandboxServer`)."""
    # envs hosted here (e.g. SWE-v0) learn that they already run inside a sandbox
    os.environ["ROCKROLL_IN_SANDBOX"] = "1"
    state = SandboxServer(workspace, max_sessions, handover)
    serve_channel(socket_path, state)  # the data plane's WebSocket channel, up before the HTTP socket answers
    httpd = make_httpd(socket_path, state)
    try:
        httpd.serve_forever(poll_interval=0.5)
    finally:
        httpd.server_close()
        state.sessions.close_all()
