"""``rockroll node``: run a standalone node agent on this machine and register it with a control plane.

The agent binds its data plane (and the admin routes the control plane calls) on ``host:port``
(127.0.0.1 by default), starts its sandbox manager (process sandboxes tied to the agent's life, or
Docker), and announces ``{endpoint, capacity, sessions}`` to ``PUT <control plane>/v1/nodes/<id>``
every :data:`HEARTBEAT_S` seconds with the cluster secret. Several control-plane replicas may be
named (comma-separated URLs): each beat goes to the one that answered last, and on to the next when
it does not answer. It prints one line
``rockroll node <id> serving <endpoint>`` once it listens.

Auth comes before bodies: the admin routes check the cluster secret and ``POST /v1/node/step`` a
session token of this agent, both in the ``Authorization`` header, before they read a byte of the
body (:mod:`rockroll.sandbox.node.dataplane`); a refused request is answered and its connection
closed, the body never drained. Request bodies are read under ``NodeOptions.max_body_bytes``
(``$ROCKROLL_NODE_MAX_BODY_BYTES``, 32 MiB by default, 64 KiB..256 MiB): a longer one is refused with
413 while it streams, at the first byte past the limit (:mod:`rockroll.sandbox.body_limit`). Replay records are bounded by ``$ROCKROLL_REPLAY_SESSION_BYTES``
and ``$ROCKROLL_REPLAY_TOTAL_BYTES`` (:mod:`rockroll.sandbox.node.replay`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.body_limit import BodyLimit
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.node.agent import NodeAgent
from rockroll.sandbox.node.dataplane import MAX_BATCH_BYTES, dataplane_routes
from rockroll.sandbox.node.host import NodeHost, admin_routes
from rockroll.sandbox.node.replay import replay_budget
from rockroll.sandbox.node.tokens import SessionTokens
from rockroll.sandbox.process import ProcessConfig

__all__ = ["NodeOptions", "NodeServer", "Heartbeat", "build_node_app", "control_urls", "run_node", "HEARTBEAT_S"]

log = logging.getLogger("rockroll.node")

HEARTBEAT_S = 1.0
# a beat's HTTP bound: a replica that takes it and never answers (stopped, hung) costs this much before the beat
# goes to the next replica, well inside the 5 s after which a control plane calls an agent stale
BEAT_TIMEOUT = httpx.Timeout(2.0, connect=1.0)
MAX_BODY_ENV = "ROCKROLL_NODE_MAX_BODY_BYTES"
MAX_BODY_BYTES = 256 * 1024 * 1024
"""The server-side cap of the agent's request body limit."""
MIN_BODY_BYTES = 64 * 1024


def _max_body_default() -> int:
    raw = os.environ.get(MAX_BODY_ENV, "").strip()
    try:
        return int(raw) if raw else MAX_BATCH_BYTES
    except ValueError:
        raise ValueError(f"{MAX_BODY_ENV} must be a number of bytes, got {raw!r}") from None


@dataclass(frozen=True)
class NodeOptions:
    """How to run one agent."""

    node_id: str
    secret: str
    control_plane: str = ""  # base URL(s) to register with, comma-separated (replicas); '' : none
    host: str = "127.0.0.1"
    port: int = 0
    backend: str = "process"
    state_dir: str = ""
    max_sandboxes: int = 8
    max_sessions_per_sandbox: int = 64
    log_level: str = "warning"
    max_body_bytes: int = field(default_factory=_max_body_default)
    """The largest request body the agent reads (default ``$ROCKROLL_NODE_MAX_BODY_BYTES`` or 32 MiB):
    a longer one is refused (413) as it streams, never read whole."""

    def __post_init__(self) -> None:
        if not MIN_BODY_BYTES <= self.max_body_bytes <= MAX_BODY_BYTES:
            raise ValueError(f"max_body_bytes must be {MIN_BODY_BYTES}..{MAX_BODY_BYTES}, got {self.max_body_bytes}")
        if not self.node_id or len(self.node_id) > 64 or not self.node_id.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"node id must be 1-64 letters, digits, '-' or '_', got {self.node_id!r}")
        if self.backend not in ("process", "docker"):
            raise ValueError(f"backend must be process or docker, got {self.backend!r}")

    @property
    def capacity(self) -> int:
        return self.max_sandboxes * self.max_sessions_per_sandbox


def control_urls(control_plane: str) -> list[str]:
    """The URLs in a comma-separated ``control_plane`` (stripped, no trailing ``/``, empties dropped)."""
    return [u.strip().rstrip("/") for u in control_plane.split(",") if u.strip().rstrip("/")]


def build_node_app(options: NodeOptions, endpoint: str) -> tuple[Starlette, NodeHost]:
    """The agent's app (data plane and admin routes) and its host; the host's manager is started."""
    replay_budget()  # read (and check) the replay bounds of the environment now, not at the first step
    state_dir = options.state_dir or f"/tmp/rockroll-node-{os.getuid()}-{options.node_id}"
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    backend = ProcessConfig(state_dir=state_dir, tie_to_parent=True) if options.backend == "process" else "docker"
    config = ManagerConfig(
        name=f"node-{options.node_id}",
        backend=backend,
        db_url=f"sqlite:///{state_dir}/node.db",
        state_dir=state_dir,
        max_sandboxes=options.max_sandboxes,
        default_spec=SandboxSpec(max_sessions=options.max_sessions_per_sandbox),
        idle_ttl_s=600.0,
        replace_stray=True,  # an agent's sessions live in its memory: none outlives it
    )
    agent = NodeAgent(options.node_id, SessionTokens(options.secret), capacity=options.capacity, endpoint=endpoint)
    host = NodeHost(agent, SandboxManager(config), max_sessions_per_sandbox=options.max_sessions_per_sandbox)
    app = Starlette(
        routes=dataplane_routes(lambda _app: agent) + admin_routes(host, options.secret),
        middleware=[Middleware(BodyLimit, limit=options.max_body_bytes)],
    )
    return app, host


class Heartbeat:
    """Registers the agent with the control plane now and every ``HEARTBEAT_S`` seconds until stopped.

    The answer may say ``forget_sessions`` (the control plane declared this agent lost and gave its
    sessions up: ``on_forget`` drops them), and lists the ``revoked`` API token ids (the control plane
    also pushes new ones at once; this catches up an agent that missed a push).
    """

    def __init__(self, options: NodeOptions, agent: NodeAgent, on_forget: Callable[[], Any] | None = None) -> None:
        self.options, self.agent, self.on_forget = options, agent, on_forget
        self.urls = control_urls(options.control_plane)
        self._at = 0  # the replica that answered last: asked first
        self.boot = secrets.token_hex(8)  # this process: a restarted agent's old sessions are gone
        self._stop = threading.Event()
        self._http = httpx.Client(timeout=BEAT_TIMEOUT, headers={"Authorization": f"Bearer {options.secret}"})
        self._thread = threading.Thread(target=self._loop, name="node-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def retarget(self, control_plane: str) -> None:
        """Register with ``control_plane`` (URLs, comma-separated) from the next beat on, first URL first."""
        self.urls, self._at = control_urls(control_plane), 0

    def beat(self) -> bool:
        info = self.agent.info()
        body = {"endpoint": info["endpoint"], "capacity": info["capacity"], "sessions": info["sessions"],
                "boot": self.boot}  # fmt: skip
        resp = None
        for i in range(len(self.urls)):
            at = (self._at + i) % len(self.urls)
            try:
                resp = self._http.put(f"{self.urls[at]}/v1/nodes/{self.agent.id}", json=body)
            except httpx.HTTPError as e:
                log.warning("cannot reach the control plane at %s: %s", self.urls[at], e)
                continue
            if resp.status_code < 500:
                self._at = at
                break
        if resp is None:
            return False
        if resp.status_code != 200:
            log.warning("the control plane refused the registration: HTTP %s %s", resp.status_code, resp.text[:200])
            return False
        answer = resp.json()
        self.agent.revoke(answer.get("revoked") or ())
        if answer.get("forget_sessions") and self.on_forget is not None:
            log.warning("the control plane had declared this agent lost: dropping its sessions")
            self.on_forget()
        return True

    def _loop(self) -> None:
        while True:
            self.beat()
            if self._stop.wait(HEARTBEAT_S):
                return

    def stop(self) -> None:
        self._stop.set()
        self._http.close()


class NodeServer:
    """One agent bound to its port: served in the foreground (``rockroll node``) or on a thread (a Ray actor)."""

    def __init__(self, options: NodeOptions) -> None:
        import uvicorn

        self.options = options
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((options.host, options.port))
        self.endpoint = f"http://{options.host}:{self.sock.getsockname()[1]}"
        app, self.host = build_node_app(options, self.endpoint)
        self.beat = Heartbeat(options, self.host.agent, self.host.drop_sessions) if options.control_plane else None
        config = uvicorn.Config(app, log_level=options.log_level, ws_max_size=16 * 1024 * 1024, lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Serve until SIGINT/SIGTERM (main thread); sessions and sandboxes are closed on the way out."""
        try:
            if self.beat is not None:
                self.beat.start()
            print(f"rockroll node {self.options.node_id} serving {self.endpoint}", flush=True)
            self.server.run(sockets=[self.sock])
        finally:
            self.close()

    def start_background(self, timeout_s: float = 30.0) -> None:
        """Serve on a thread (no signal handlers) and return once it listens."""
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), name="node-agent", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.server.started:
            raise RuntimeError(f"node agent {self.options.node_id} did not start serving within {timeout_s} s")
        if self.beat is not None:
            self.beat.start()

    def retarget(self, control_plane: str) -> None:
        """Heartbeat to ``control_plane`` from now on (a control plane adopted this agent); the agent's
        registration id (its boot) is kept, so it is not taken for a restarted agent."""
        self.options = dataclasses.replace(self.options, control_plane=control_plane)
        if self.beat is not None:
            self.beat.retarget(control_plane)
        else:
            self.beat = Heartbeat(self.options, self.host.agent, self.host.drop_sessions)
            self.beat.start()

    def stop(self) -> None:
        """Stop a background server and close its sessions and sandboxes."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.close()

    def close(self) -> None:
        if self.beat is not None:
            self.beat.stop()
        self.host.close()
        self.sock.close()


def run_node(options: NodeOptions) -> None:
    """Serve until SIGINT/SIGTERM; sessions and sandboxes are closed on the way out."""
    NodeServer(options).serve()
