"""The API's routers, one per resource."""

from rockroll.api.routes import envs, health, jobs, sandboxes, session_ws, sessions, ui

__all__ = ["envs", "health", "jobs", "sandboxes", "session_ws", "sessions", "ui"]
