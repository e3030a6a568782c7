"""Node agents: one per machine, they own its sandboxes and serve the data plane (issue 14).

* :mod:`~rockroll.sandbox.node.tokens`: signed, short-lived session tokens (PyJWT).
* :mod:`~rockroll.sandbox.node.sequence`: per-session step numbers; a replay returns the recorded step.
* :mod:`~rockroll.sandbox.node.agent`: the agent's session table and the calls on it.
* :mod:`~rockroll.sandbox.node.dataplane`: WebSocket and batch routes where clients step directly.
* :mod:`~rockroll.sandbox.node.client`: the data-plane client (rollouts and the SDK use it).
* :mod:`~rockroll.sandbox.node.host`, :mod:`~rockroll.sandbox.node.serve`: a standalone ``rockroll node``.
* :mod:`~rockroll.sandbox.node.remote`: the control plane's calls to a standalone agent.
"""

from __future__ import annotations

__all__: list[str] = []
