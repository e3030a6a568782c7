"""Sandboxes as an API resource: owners, time-to-live, per-owner limits and the views callers see."""

__all__: list[str] = []
