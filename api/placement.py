"""The one adapter between the control plane and the sandbox layer.

:class:`Placement` owns a :class:`rockroll.sandbox.SandboxManager` and exposes what the routes need:
placing env sessions on pooled sandboxes (least-loaded first, the manager's load balancer),
user sandboxes (created leased, so no session is placed on them), ``exec``, files, restarts and
counts for health and metrics. Sandboxes are started with the custom-env plugin hook
(:mod:`rockroll.sandbox.server.plugins`): each custom env gets a pool of its own whose sandboxes receive the
env's files through the file API before its first session, so custom code loads inside those
sandboxes only, never in the control plane nor next to other envs' sessions.

Threat model: the control plane is trusted; everything read back from a sandbox is untrusted data
and is only returned as JSON.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.errors import SandboxNotFound
from rockroll.sandbox.managed import SandboxState
from rockroll.sandbox.manager import ManagerConfig, SandboxManager
from rockroll.sandbox.pool import PoolConfig
from rockroll.sandbox.server.plugins import DEFAULT_PLUGIN_DIR, PLUGINS_ENV
from rockroll.sandbox.session import RemoteSession

__all__ = ["Placement", "SESSION_POOL"]

SESSION_POOL = "sessions"
OPEN_CONCURRENCY = 4


class Placement:
    """Sandboxes and env sessions for the API (see the module docstring)."""

    def __init__(
        self,
        *,
        backend: str,
        db_url: str,
        state_dir: str,
        max_sandboxes: int,
        max_sessions_per_sandbox: int,
        pool_size: int,
        manager_name: str = "api",
    ) -> None:
        self._provisioned: set[tuple[str, int]] = set()
        self._pick_lock = threading.Lock()
        self._open_slots = threading.BoundedSemaphore(OPEN_CONCURRENCY)
        self.session_spec = self.spec(name=SESSION_POOL, max_sessions=max_sessions_per_sandbox)
        pools = (PoolConfig(self.session_spec, min_idle=min(pool_size, max_sandboxes), max_total=max_sandboxes),)
        config = ManagerConfig(
            name=manager_name,
            backend=backend,
            db_url=db_url,
            state_dir=state_dir,
            max_sandboxes=max_sandboxes,
            default_spec=self.session_spec,
            pools=pools,
            idle_ttl_s=None,
        )
        self.manager = SandboxManager(config)
        self.backend_name = self.manager.backend.name
        self.pools = {p.name: p for p in pools}
        self._drop_orphaned_sessions()

    def _drop_orphaned_sessions(self) -> None:
        """Replace adopted session sandboxes that still host env sessions of a dead server.

        The API keeps its sessions in memory, so after a crash (SIGKILL) their env sessions live
        on in the adopted sandboxes with nobody to close them: they would hold session slots
        forever. Leased (user) sandboxes are left alone: the API places no env sessions on them.
        """
        for sb in self.manager.list():
            if not sb.leased and sb.sessions > 0:
                self.manager.schedule_restart(sb, f"{sb.sessions} sessions of a previous server")

    # -------------------------------------------------------------- specs
    def spec(self, **fields: Any) -> SandboxSpec:
        """A sandbox spec whose server can load the API's custom envs (see module docstring)."""
        env = dict(fields.pop("env", {}) or {})
        env.setdefault("ROCKROLL_ENV_MODULES", "rockroll.sandbox.server.plugins")
        env.setdefault(PLUGINS_ENV, DEFAULT_PLUGIN_DIR)
        return SandboxSpec(env=tuple(sorted(env.items())), **fields)

    def spec_for_custom(self, custom: Any) -> SandboxSpec:
        """The spec of a custom env's own pool (its image, if it brings one)."""
        base = self.session_spec.to_dict()
        base.update(name=f"env-{custom.fingerprint()}")
        if custom.kind == "image" and custom.image:
            base["image"] = custom.image
        return SandboxSpec.from_dict(base)

    # ----------------------------------------------------------- sessions
    def open_session(self, env_id: str, kwargs: dict[str, Any], custom: Any = None) -> RemoteSession:
        """Place an env session on the least-loaded sandbox of the right pool.

        Built-in envs share the ``sessions`` pool (the manager's load balancer places them);
        a custom env goes to its own pool, whose sandboxes get its files first. At most
        ``OPEN_CONCURRENCY`` placements run at once: each opens a new connection to an in-sandbox
        server, whose listen backlog is small (a burst of connects gets EAGAIN).
        """
        with self._open_slots:
            if custom is None:
                return self.manager.open_session(env_id, spec=self.session_spec, **kwargs)
            spec = self.spec_for_custom(custom)
            sb = self._pick_or_create(spec)
            key = (sb.id, sb.generation)
            if key not in self._provisioned:
                for rel, data in custom.files().items():
                    sb.write_file(f"{DEFAULT_PLUGIN_DIR}/{rel}", data)
                self._provisioned.add(key)
            return sb.open_session(env_id, **kwargs)

    def _pick_or_create(self, spec: SandboxSpec) -> Any:
        """The least-loaded ready member of ``spec``'s pool with a free slot, or a new one."""
        with self._pick_lock:
            members = [
                sb
                for sb in self.manager.members(spec.name)
                if sb.state == SandboxState.READY and not sb.leased and sb.sessions < sb.spec.max_sessions
            ]
            if members:
                return min(members, key=lambda sb: sb.load)
        return self.manager.create(spec, pool=spec.name)

    def drop_custom_pool(self, custom: Any) -> None:
        """Delete the sandboxes of a custom env's pool (after the env is deleted)."""
        for sb in self.manager.members(self.spec_for_custom(custom).name):
            try:
                self.manager.delete(sb.id)
            except SandboxNotFound:
                pass

    # ---------------------------------------------------------- sandboxes
    def create_sandbox(self, **fields: Any) -> Any:
        """A sandbox for one user (leased: sessions are never placed on it)."""
        spec = self.spec(**fields)
        return self.manager.create(spec, pool=spec.name, leased=True)

    def get(self, sandbox_id: str) -> Any:
        """A managed sandbox (``SandboxNotFound`` when none)."""
        return self.manager.get(sandbox_id)

    def list(self) -> list[Any]:
        """Every live managed sandbox."""
        return self.manager.list()

    def delete(self, sandbox_id: str) -> None:
        """Stop and forget a sandbox."""
        self.manager.delete(sandbox_id)

    def restart(self, sandbox_id: str) -> Any:
        """Replace a sandbox under the same id (blocking)."""
        return self.manager.restart(sandbox_id, reason="restarted through the API")

    # ------------------------------------------------------------- views
    @staticmethod
    def describe(sb: Any) -> dict[str, Any]:
        """The JSON view of one managed sandbox."""
        h = sb.last_health
        return {
            "id": sb.id,
            "state": str(sb.state),
            "pool": sb.pool,
            "backend": sb.backend.name,
            "image": sb.spec.image if sb.backend.name == "docker" else "",
            "generation": sb.generation,
            "restarts": sb.restarts,
            "sessions": sb.sessions,
            "max_sessions": sb.spec.max_sessions,
            "leased": sb.leased,
            "created_at": sb.created_at,
            "age_s": round(time.time() - sb.created_at, 3),
            "uptime_s": h.uptime_s if h else 0.0,
            "cpu_seconds": h.cpu_seconds if h else 0.0,
            "memory_bytes": h.memory_bytes if h else 0,
            "spec": {k: v for k, v in sb.spec.to_dict().items() if k != "env"},
        }

    def snapshot(self) -> dict[str, Any]:
        """Counts for health and metrics."""
        by_state: dict[str, int] = {}
        restarts = 0
        for sb in self.manager.list():
            by_state[str(sb.state)] = by_state.get(str(sb.state), 0) + 1
            restarts += sb.restarts
        return {"by_state": by_state, "restarts": restarts}

    def pool_views(self) -> list[dict[str, Any]]:
        """Every pool: the configured session pool, custom envs' pools and user sandboxes."""
        members: dict[str, list[Any]] = {name: [] for name in self.pools}
        for sb in self.manager.list():
            members.setdefault(sb.pool, []).append(sb)
        out = []
        for name, sbs in sorted(members.items()):
            pc = self.pools.get(name)
            out.append(
                {
                    "name": name,
                    "min_idle": pc.min_idle if pc else None,
                    "max_total": pc.max_total if pc else None,
                    "members": len(sbs),
                    "ready": sum(1 for m in sbs if m.state == SandboxState.READY),
                    "sessions": sum(m.sessions for m in sbs),
                }
            )
        return out

    def close(self, stop_sandboxes: bool = False) -> None:
        """Stop the manager (sandboxes stay up for the next start unless ``stop_sandboxes``)."""
        self.manager.close(stop_sandboxes=stop_sandboxes)
