"""The control plane: HTTP env API, client SDK and the ``rockroll`` command line."""

__all__: list[str] = []
