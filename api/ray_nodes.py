"""Ray as the cluster: one node agent per Ray node, started and watched by ``rockroll serve --ray ADDRESS``.

:class:`RayNodes` connects this server to a Ray cluster as a driver and, every :data:`SYNC_S`,
compares the cluster's live nodes (``ray.nodes()``) with the agents it started:

* a live Ray node without an agent gets one: a :class:`~rockroll.sandbox.node.ray_agent.RayNodeAgent`
  actor pinned to it (node-affinity scheduling), bound to the node's address, which registers with
  this control plane like a standalone ``rockroll node`` and from then on heartbeats;
* a Ray node that left the cluster, or whose agent actor died, is reported lost to the control plane
  (``POST /v1/nodes/{id}/lost`` with the cluster secret): its sessions answer ``410 session_lost``
  and placement skips it. The agent's process sandboxes die with its actor's process. The work of a
  lost session is placed again by the rollout layer: the infra failure retries the episode on a
  fresh session, which the control plane opens on a live node. An actor that died on a live node is
  started again after :data:`RESTART_AFTER_S`.

The agents reach this server at ``control_url``; their sandboxes live under ``state_root`` on their
node. Ray is an optional dependency, imported when :meth:`RayNodes.start` runs. A Ray address on
loopback (``127.0.0.1:PORT``) and ``local`` start this driver with node IP 127.0.0.1 (never the
machine's interface address); ``local`` starts a one-machine Ray cluster here.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx

from rockroll.api.periodic import Periodic
from rockroll.sandbox.node.ray_agent import agent_id_for, start_agent
from rockroll.sandbox.node.serve import NodeOptions

__all__ = ["RayNodes", "ray_init_args", "SYNC_S", "RESTART_AFTER_S"]

log = logging.getLogger("rockroll.api")

SYNC_S = 0.5
RESTART_AFTER_S = 10.0
LOOPBACK = ("127.0.0.1", "localhost")


def ray_init_args(address: str) -> dict[str, Any]:
    """``ray.init`` keyword arguments for ``--ray ADDRESS`` (``auto``, ``local`` or ``HOST:PORT``)."""
    if not address or any(c.isspace() for c in address):
        raise ValueError(f"--ray takes auto, local or HOST:PORT of the Ray cluster, got {address!r}")
    base: dict[str, Any] = {"namespace": "rockroll", "log_to_driver": False, "configure_logging": False}
    if address == "local":
        return base | {"address": "local", "_node_ip_address": "127.0.0.1", "include_dashboard": False}
    host = address.removeprefix("ray://").rsplit(":", 1)[0]
    return base | {"address": address} | ({"_node_ip_address": "127.0.0.1"} if host in LOOPBACK else {})


class RayNodes(Periodic):
    """Starts and watches one node agent per Ray node (see the module docstring)."""

    interval_s, name = SYNC_S, "ray-nodes"

    def __init__(
        self,
        address: str,
        *,
        control_url: str,
        secret: str,
        state_root: str = "",
        backend: str = "process",
        max_sandboxes: int = 8,
        max_sessions_per_sandbox: int = 64,
    ) -> None:
        super().__init__()
        self.init_args = ray_init_args(address)
        self.control_url = control_url.rstrip("/")
        self.secret = secret
        self.node_args = {"backend": backend, "max_sandboxes": max_sandboxes,
                          "max_sessions_per_sandbox": max_sessions_per_sandbox}  # fmt: skip
        self.state_root = state_root.rstrip("/")
        self.agents: dict[str, tuple[Any, Any]] = {}  # Ray node id -> (actor, its wait() call)
        self._died: dict[str, float] = {}  # Ray node id -> when its agent was lost (no restart before RESTART_AFTER_S)
        self._http = httpx.Client(timeout=5.0, headers={"Authorization": f"Bearer {secret}"})

    def start(self) -> None:
        """Connect to Ray (blocking) and watch its nodes on a thread."""
        if self.init_args.get("_node_ip_address") == "127.0.0.1":
            # ray.init turns a loopback address into this machine's interface address (which a cluster
            # bound to loopback does not listen on) unless told this driver is not part of a multi-host
            # cluster; read when Ray is first imported
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        ray.init(**self.init_args)
        self.tick()
        self.start_ticking()

    def options_for(self, ray_node_id: str, node: dict[str, Any]) -> NodeOptions:
        agent_id = agent_id_for(ray_node_id)
        state_dir = f"{self.state_root}/r{ray_node_id[:8]}" if self.state_root else ""  # short: socket paths
        return NodeOptions(node_id=agent_id, secret=self.secret, control_plane=self.control_url,
                           host=node["NodeManagerAddress"], state_dir=state_dir, **self.node_args)  # fmt: skip

    def tick(self) -> None:
        """One round: agents for new Ray nodes, losses reported for the departed (see the module docstring)."""
        import ray

        alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        for rid, (_actor, waiting) in list(self.agents.items()):
            if rid not in alive:
                self._lose(rid, f"node {agent_id_for(rid)} is gone: its Ray node left the cluster")
            elif ray.wait([waiting], timeout=0)[0]:
                self._lose(rid, f"node {agent_id_for(rid)} is gone: its Ray actor died")
        now = time.monotonic()
        for rid, node in alive.items():
            if rid in self.agents or now - self._died.get(rid, -RESTART_AFTER_S) < RESTART_AFTER_S:
                continue
            actor = start_agent(rid, self.options_for(rid, node))
            self.agents[rid] = (actor, actor.wait.remote())
            log.info("started node agent %s on Ray node %s", agent_id_for(rid), node["NodeManagerAddress"])

    def _lose(self, rid: str, reason: str) -> None:
        import ray

        actor, _waiting = self.agents.pop(rid)
        self._died[rid] = time.monotonic()
        try:
            self._http.post(f"{self.control_url}/v1/nodes/{agent_id_for(rid)}/lost", json={"reason": reason})
        except httpx.HTTPError as e:  # the node watch finds it silent anyway
            log.warning("cannot report node %s lost: %s", agent_id_for(rid), e)
        ray.kill(actor, no_restart=True)

    def close(self) -> None:
        """Stop the agents (their sessions and sandboxes) and leave the Ray cluster."""
        import ray

        self.stop_ticking(join_s=5)
        if not ray.is_initialized():
            return
        stops = [actor.stop.remote() for actor, _ in self.agents.values()]
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=15)
        for actor, _ in self.agents.values():
            ray.kill(actor, no_restart=True)
        self.agents.clear()
        self._http.close()
        ray.shutdown()
