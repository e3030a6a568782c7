"""Ray as the cluster: one node agent per Ray node, started (or adopted) and watched by ``rockroll serve-api --ray ADDRESS``.

:class:`RayNodes` connects this server to a Ray cluster as a driver and, every :data:`SYNC_S`,
compares the cluster's live nodes (``ray.nodes()``) with the agents it holds:

* a live Ray node without an agent gets one: a detached, named
  :class:`~rockroll.sandbox.node.ray_agent.RayNodeAgent` actor pinned to it (node-affinity
  scheduling), bound to the node's address, which registers with the control plane like a
  standalone ``rockroll serve-node`` and from then on heartbeats. An agent already running there (started
  by an earlier serve, or by another control-plane replica on the same cluster) is *adopted*
  instead: found by its name, watched, and told this server's ``control_url`` (put first among the
  URLs it heartbeats to, the earlier ones kept behind); its sessions are untouched and it registers
  with this control plane by its next heartbeat;
* a Ray node that left the cluster, or whose agent actor died, is reported lost to the control plane
  (``POST /v1/nodes/{id}/lost`` with the cluster secret, to the first URL of ``control_url`` that
  answers): its sessions answer ``410 session_lost`` and placement skips it. The agent's process
  sandboxes die with its actor's process. The work of a lost session is placed again by the rollout
  layer: the infra failure retries the episode on a fresh session, which the control plane opens on
  a live node. An actor that died on a live node is started again after :data:`RESTART_AFTER_S`.

The agents are detached: they outlive this server. :meth:`RayNodes.close` leaves the cluster and the
agents keep serving their sessions (the data plane does not pass through the control plane); the
next serve adopts them. :meth:`RayNodes.stop_agents` ends them (their sessions and sandboxes); with
``stop_agents_on_exit`` (always for ``local``: the one-machine Ray started here dies with this
server anyway) :meth:`RayNodes.close` does so first.

The agents reach this server at ``control_url`` (one URL or several, comma-separated, as
``NodeOptions.control_plane`` takes them); their sandboxes live under ``state_root`` on their node.
Ray is an optional dependency, imported when :meth:`RayNodes.start` runs. A Ray address on loopback
(``127.0.0.1:PORT``) and ``local`` start this driver with node IP 127.0.0.1 (never the machine's
interface address); ``local`` starts a one-machine Ray cluster here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import httpx

from rockroll.api.server.periodic import Periodic
from rockroll.sandbox.node.ray_agent import NAMESPACE, agent_id_for, control_urls, ensure_agent
from rockroll.sandbox.node.serve import NodeOptions
from rockroll.sandbox.ray_priority import workers_at_driver_priority

__all__ = ["RayNodes", "ray_init_args", "SYNC_S", "RESTART_AFTER_S", "WAIT_S"]

log = logging.getLogger("rockroll.api")

SYNC_S = 0.5
RESTART_AFTER_S = 10.0
WAIT_S = 30.0  # one watching call on an agent lasts at most this long, then is made again
LOOPBACK = ("127.0.0.1", "localhost")


def ray_init_args(address: str) -> dict[str, Any]:
    """``ray.init`` keyword arguments for ``--ray ADDRESS`` (``auto``, ``local`` or ``HOST:PORT``)."""
    if not address or any(c.isspace() for c in address):
        raise ValueError(f"--ray takes auto, local or HOST:PORT of the Ray cluster, got {address!r}")
    base: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "configure_logging": False}
    if address == "local":
        return base | {"address": "local", "_node_ip_address": "127.0.0.1", "include_dashboard": False}
    host = address.removeprefix("ray://").rsplit(":", 1)[0]
    return base | {"address": address} | ({"_node_ip_address": "127.0.0.1"} if host in LOOPBACK else {})


class RayNodes(Periodic):
    """Starts or adopts, and watches, one node agent per Ray node (see the module docstring)."""

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
        stop_agents_on_exit: bool = False,
    ) -> None:
        super().__init__()
        self.init_args = ray_init_args(address)
        if not control_urls(control_url):
            raise ValueError("the Ray node agents need the URL of this control plane (control_url)")
        self.control_url = ",".join(control_urls(control_url))
        self.secret = secret
        self.stop_agents_on_exit = stop_agents_on_exit or address == "local"
        self.backend, self.max_sandboxes, self.max_sessions_per_sandbox = (
            backend,
            max_sandboxes,
            max_sessions_per_sandbox,
        )
        self.state_root = state_root.rstrip("/")
        self.agents: dict[str, tuple[Any, Any]] = {}  # Ray node id -> (actor, its pending wait() call)
        self._died: dict[str, float] = {}  # Ray node id -> when its agent was lost (no restart before RESTART_AFTER_S)
        self._lock = threading.Lock()  # one round at a time; stop_agents waits for it
        self._stopped = False
        self._http = httpx.Client(timeout=5.0, headers={"Authorization": f"Bearer {secret}"})

    def start(self) -> None:
        """Connect to Ray (blocking), start or adopt the agents and watch the nodes on a thread."""
        if self.init_args.get("_node_ip_address") == "127.0.0.1":
            # ray.init turns a loopback address into this machine's interface address (which a cluster
            # bound to loopback does not listen on) unless told this driver is not part of a multi-host
            # cluster; read when Ray is first imported
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        if self.init_args.get("address") == "local":  # a cluster started here: its agents serve at normal priority
            workers_at_driver_priority()
        import ray

        ray.init(**self.init_args)
        self.tick()
        self.start_ticking()

    def options_for(self, ray_node_id: str, node: dict[str, Any]) -> NodeOptions:
        agent_id = agent_id_for(ray_node_id)
        state_dir = f"{self.state_root}/r{ray_node_id[:8]}" if self.state_root else ""  # short: socket paths
        return NodeOptions(node_id=agent_id, secret=self.secret, control_plane=self.control_url,
                           host=node["NodeManagerAddress"], state_dir=state_dir, backend=self.backend,
                           max_sandboxes=self.max_sandboxes,
                           max_sessions_per_sandbox=self.max_sessions_per_sandbox)  # fmt: skip

    def tick(self) -> None:
        """One round: agents for new Ray nodes, losses reported for the departed (see the module docstring)."""
        import ray

        with self._lock:
            if self._stopped:
                return
            alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
            for rid in list(self.agents):
                if rid not in alive:
                    self._lose(rid, f"node {agent_id_for(rid)} is gone: its Ray node left the cluster")
                elif self._ended(rid):
                    self._lose(rid, f"node {agent_id_for(rid)} is gone: its Ray actor died")
            now = time.monotonic()
            for rid, node in alive.items():
                if rid in self.agents or now - self._died.get(rid, -RESTART_AFTER_S) < RESTART_AFTER_S:
                    continue
                actor, adopted = ensure_agent(rid, self.options_for(rid, node))
                if adopted:  # heartbeats reach this server from now on; its sessions stay as they are
                    actor.adopt.remote(self.control_url)
                self.agents[rid] = (actor, actor.wait.remote(WAIT_S))
                how = "adopted" if adopted else "started"
                log.info("%s node agent %s on Ray node %s", how, agent_id_for(rid), node["NodeManagerAddress"])

    def _ended(self, rid: str) -> bool:
        """Whether the agent on Ray node ``rid`` died or was stopped; a watching call that timed out is renewed."""
        import ray

        actor, waiting = self.agents[rid]
        if not ray.wait([waiting], timeout=0)[0]:
            return False
        try:
            answer = ray.get(waiting, timeout=5)
        except Exception:  # noqa: BLE001 - RayActorError and kin: the actor is gone
            return True
        if answer == "running":
            self.agents[rid] = (actor, actor.wait.remote(WAIT_S))
            return False
        return True

    def _lose(self, rid: str, reason: str) -> None:
        import ray

        actor, _waiting = self.agents.pop(rid)
        self._died[rid] = time.monotonic()
        self._report_lost(agent_id_for(rid), reason)
        ray.kill(actor, no_restart=True)

    def _report_lost(self, agent_id: str, reason: str) -> None:
        """``POST /lost`` to the first control-plane URL that answers (the node watch finds it silent anyway)."""
        for url in control_urls(self.control_url):
            try:
                self._http.post(f"{url}/v1/nodes/{agent_id}/lost", json={"reason": reason})
                return
            except httpx.HTTPError as e:
                log.warning("cannot report node %s lost to %s: %s", agent_id, url, e)

    def stop_agents(self, timeout_s: float = 15.0) -> int:
        """Stop watching and end every agent held (their sessions and sandboxes); returns how many."""
        import ray

        self.stop_ticking(join_s=5)
        with self._lock:
            self._stopped = True
            agents = [actor for actor, _ in self.agents.values()]
            self.agents.clear()
            if not agents or not ray.is_initialized():
                return 0
            stops = [actor.stop.remote() for actor in agents]
            ray.wait(stops, num_returns=len(stops), timeout=timeout_s)
            for actor in agents:
                ray.kill(actor, no_restart=True)
            return len(agents)

    def close(self) -> None:
        """Leave the Ray cluster; the agents keep serving (stopped first with ``stop_agents_on_exit``)."""
        import ray

        self.stop_ticking(join_s=5)
        try:
            if not ray.is_initialized():
                return
            if self.stop_agents_on_exit:
                log.info("stopped %d node agents", self.stop_agents())
            else:
                log.info("leaving %d node agents serving on the Ray cluster", len(self.agents))
            ray.shutdown()
        finally:
            self._http.close()
