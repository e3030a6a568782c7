"""Sandbox manager: isolated, health-monitored env servers in Docker containers or processes."""

__all__: list[str] = []
