"""Env sessions: live sessions, batched calls, and their database records."""

__all__: list[str] = []
