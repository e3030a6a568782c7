"""The ``rockroll`` command line: one module per command group, mounted in :mod:`rockroll.cli.main`.

The top layer (above ``rockroll.api``). ``python -m rockroll.cli`` runs it like the console script.
"""

from __future__ import annotations

if __name__ != "rockroll.cli":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.cli, not {__name__}: rockroll's packages live in the rockroll namespace")

__all__: list[str] = []
