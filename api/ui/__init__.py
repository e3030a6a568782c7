"""The env-health web page: static files and the fit of the overview's curves."""

__all__: list[str] = []
