"""The env catalog the API serves (built-in envs plus custom ones registered over HTTP)."""

__all__: list[str] = []
