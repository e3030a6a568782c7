"""A node agent as a detached Ray actor: one per Ray node, pinned there, registering like a standalone ``rockroll node``.

:class:`RayNodeAgent` is the actor's body: it serves :class:`~rockroll.sandbox.node.serve.NodeServer`
on a thread of the actor's process (bound to the Ray node's address) and heartbeats to the control
plane(s) in ``NodeOptions.control_plane``. Its process sandboxes are tied to that process
(``tie_to_parent``), so when the Ray node leaves (its raylet and workers die) the sandboxes go with it.

The actor is *detached* and named ``rockroll-<agent id>`` in namespace ``rockroll``
(:func:`agent_name`): it outlives the ``rockroll serve`` that started it, so a control plane that
stops, dies or restarts loses no session (the data plane does not pass through it). The next serve
on the cluster finds the agent by its name and adopts it (:func:`ensure_agent`); two serves racing
to start one on the same Ray node end up sharing the one Ray registered first. An adopting serve
tells the agent where it listens (:meth:`RayNodeAgent.adopt`): its URLs go first in the agent's
heartbeat targets, the earlier ones stay behind them; the agent's sessions are untouched.
Only :meth:`RayNodeAgent.stop` (or the Ray node leaving) ends an agent.

Ray is an optional dependency: it is imported only when an actor is started or looked up.
"""

from __future__ import annotations

import threading
from typing import Any

from rockroll.sandbox.node.serve import NodeOptions, NodeServer, control_urls

__all__ = [
    "RayNodeAgent",
    "start_agent",
    "ensure_agent",
    "agent_id_for",
    "agent_name",
    "control_urls",
    "merged_control_plane",
    "NAMESPACE",
    "MAX_CONTROL_URLS",
]

NAMESPACE = "rockroll"
MAX_CONTROL_URLS = 4  # heartbeat targets an agent keeps over successive adoptions


def agent_id_for(ray_node_id: str) -> str:
    """The agent id of the Ray node ``ray_node_id`` (hex): ``ray-`` and its first 12 digits."""
    return f"ray-{ray_node_id[:12]}"


def agent_name(agent_id: str) -> str:
    """The Ray actor name of agent ``agent_id`` (in namespace :data:`NAMESPACE`)."""
    return f"rockroll-{agent_id}"


def merged_control_plane(current: str, adopter: str) -> str:
    """The heartbeat target after a control plane at ``adopter`` adopts an agent heartbeating to ``current``:
    ``current`` when it names every URL of ``adopter`` already, else ``adopter``'s URLs first, then the others
    of ``current`` (another replica may still answer when the adopter is gone), at most :data:`MAX_CONTROL_URLS`."""
    mine, theirs = control_urls(adopter), control_urls(current)
    if not mine or set(mine) <= set(theirs):
        return current
    return ",".join((mine + [u for u in theirs if u not in mine])[:MAX_CONTROL_URLS])


class RayNodeAgent:
    """The actor (see the module docstring); its methods run concurrently (``max_concurrency``)."""

    def __init__(self, options: NodeOptions) -> None:
        self.server = NodeServer(options)
        self.server.start_background()
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def endpoint(self) -> str:
        return self.server.endpoint

    def control_plane(self) -> str:
        """Where this agent heartbeats now (one URL or several, comma-separated)."""
        return self.server.options.control_plane

    def wait(self, timeout_s: float | None = None) -> str:
        """``stopped`` once the agent is stopped, ``running`` after ``timeout_s``: a caller holding this
        call learns of the actor's death (the call fails). Bounded, so a caller that died frees its thread."""
        return "stopped" if self._stopped.wait(timeout_s) else "running"

    def adopt(self, control_plane: str) -> str:
        """A control plane took this agent over: heartbeat to its URLs first from now on, then to the ones
        named before (:func:`merged_control_plane`; unchanged when they are all named already). The agent's
        sessions, sandboxes and registration id (``boot``) are kept, so no control plane takes it for a
        restarted agent. Returns the heartbeat target now in use."""
        with self._lock:
            current = self.server.options.control_plane
            merged = merged_control_plane(current, control_plane)
            if self._stopped.is_set() or merged == current:
                return current
            self.server.retarget(merged)
            return merged

    def stop(self) -> None:
        """Close the agent's sessions and sandboxes and stop serving (the actor stays until killed)."""
        with self._lock:
            if self._stopped.is_set():
                return
            self.server.stop()
            self._stopped.set()


def _options(ray_node_id: str, options: NodeOptions) -> dict[str, Any]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "name": agent_name(options.node_id),
        "namespace": NAMESPACE,
        "lifetime": "detached",
        "num_cpus": 0,
        "max_restarts": 0,
        "max_concurrency": 16,  # wait() calls of several control planes, adopt, stop, endpoint
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=ray_node_id, soft=False),
    }


def start_agent(ray_node_id: str, options: NodeOptions) -> Any:
    """Start a detached :class:`RayNodeAgent` on Ray node ``ray_node_id``; returns its actor handle.

    Raises ``ValueError`` when an agent of that name exists already (see :func:`ensure_agent`)."""
    import ray

    return ray.remote(RayNodeAgent).options(**_options(ray_node_id, options)).remote(options)


def ensure_agent(ray_node_id: str, options: NodeOptions) -> tuple[Any, bool]:
    """The agent of Ray node ``ray_node_id``: the live one of its name (adopted: True) or a new one (False).

    Another control plane may start it between the look-up and the start: Ray refuses the second
    name (``ValueError``) and the one it registered is adopted."""
    import ray

    name = agent_name(options.node_id)
    try:
        return ray.get_actor(name, namespace=NAMESPACE), True
    except ValueError:
        pass
    try:
        return start_agent(ray_node_id, options), False
    except ValueError:
        return ray.get_actor(name, namespace=NAMESPACE), True
