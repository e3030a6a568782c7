"""The server itself: app factory, settings, auth, dependencies, errors, limits, metrics and shared state."""

__all__: list[str] = []
