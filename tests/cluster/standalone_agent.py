"""A standalone ``rockroll node`` on 127.0.0.1 with no control plane: sessions opened through its admin
routes with the cluster secret, session tokens minted with the same secret (tests of one agent alone)."""

from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from rockroll.api.server.serve_proc import NodeProc, scratch_dir
from rockroll.sandbox.node.tokens import SessionTokens

ENV, KWARGS = "FrozenLake-v0", {"size": 4, "is_slippery": False}


@dataclass
class Agent:
    """A running agent, its secret, and the sessions opened on it (id -> session token)."""

    proc: NodeProc
    secret: str
    sessions: dict[str, str] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return self.proc.endpoint

    @property
    def pid(self) -> int:
        assert self.proc.proc is not None
        return self.proc.proc.pid

    def open_session(self, owner: str = "alice") -> tuple[str, str]:
        """Open a session of ``ENV`` for ``owner``: ``(session id, session token)``."""
        sid = f"se-{secrets.token_hex(8)}"
        resp = httpx.post(
            f"{self.endpoint}/v1/node/admin/sessions",
            json={"session_id": sid, "env": ENV, "kwargs": KWARGS, "owner": owner},
            headers={"Authorization": f"Bearer {self.secret}"},
            timeout=120,
        )
        assert resp.status_code == 200, resp.text
        token, _ = SessionTokens(self.secret).issue(sid, owner, self.proc.node_id)
        self.sessions[sid] = token
        return sid, token

    def log(self) -> str:
        return "".join(self.proc.lines)


def wait_listening(endpoint: str, timeout_s: float = 30.0) -> None:
    """Wait until the agent answers its health route (it prints its endpoint before it listens)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{endpoint}/v1/node/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the agent at {endpoint} never answered its health route")


@contextmanager
def standalone_agent(tag: str) -> Iterator[Agent]:
    """A ``rockroll node`` subprocess (configured by this process's environment), stopped on the way out."""
    d = scratch_dir(tag)
    secret = secrets.token_urlsafe(32)
    secret_file = d / "secret"
    secret_file.write_text(secret)
    proc = NodeProc(d, secret_file, node_id=f"n{secrets.token_hex(4)}", max_sandboxes=2)
    try:
        proc.start()
        wait_listening(proc.endpoint)
        yield Agent(proc, secret)
    finally:
        proc.cleanup()
        shutil.rmtree(d, ignore_errors=True)
