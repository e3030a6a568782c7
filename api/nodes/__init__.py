"""Node agents: the node table, its store and watch, placement of sessions, Ray nodes, token revocations."""

__all__: list[str] = []
