"""A node agent as a Ray actor: one per Ray node, pinned there, registering like a standalone ``rockroll node``.

:class:`RayNodeAgent` is the actor's body: it serves :class:`~rockroll.sandbox.node.serve.NodeServer`
on a thread of the actor's process (bound to the Ray node's address) and heartbeats to the control
plane. Its process sandboxes are tied to that process (``tie_to_parent``), so when the Ray node
leaves (its raylet and workers die) the sandboxes go with it. :func:`start_agent` starts one on a
given Ray node with hard node-affinity scheduling and no CPU of its own (the sandboxes use the CPUs).

Ray is an optional dependency: it is imported only when an actor is started.
"""

from __future__ import annotations

import threading
from typing import Any

from rockroll.sandbox.node.serve import NodeOptions, NodeServer

__all__ = ["RayNodeAgent", "start_agent", "agent_id_for"]


def agent_id_for(ray_node_id: str) -> str:
    """The agent id of the Ray node ``ray_node_id`` (hex): ``ray-`` and its first 12 digits."""
    return f"ray-{ray_node_id[:12]}"


class RayNodeAgent:
    """The actor (see the module docstring); its methods run concurrently (``max_concurrency``)."""

    def __init__(self, options: NodeOptions) -> None:
        self.server = NodeServer(options)
        self.server.start_background()
        self._stopped = threading.Event()

    def endpoint(self) -> str:
        return self.server.endpoint

    def wait(self) -> str:
        """Block until the agent is stopped: a caller holding this call learns of the actor's death."""
        self._stopped.wait()
        return "stopped"

    def stop(self) -> None:
        self.server.stop()
        self._stopped.set()


def start_agent(ray_node_id: str, options: NodeOptions) -> Any:
    """Start a :class:`RayNodeAgent` on Ray node ``ray_node_id``; returns its actor handle."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(RayNodeAgent).options(
        name=f"rockroll-{options.node_id}",
        namespace="rockroll",
        num_cpus=0,
        max_restarts=0,
        max_concurrency=4,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=ray_node_id, soft=False),
    )
    return actor.remote(options)
