"""The ``rockroll`` command line: one module per command group, mounted in :mod:`rockroll.cli.main`.

The top layer (above ``rockroll.api``). ``python -m rockroll.cli`` runs it like the console script.
"""

from __future__ import annotations

import os
import sys

if __name__ != "rockroll.cli":  # a second copy under another name would duplicate every class
    raise ImportError(f"import rockroll.cli, not {__name__}: rockroll's packages live in the rockroll namespace")

__all__: list[str] = []


def _quiet_interrupt(previous):  # type: ignore[no-untyped-def]
    """An ``excepthook`` that ends an interrupt while the console script imports its commands without a traceback."""

    def hook(kind, value, tb):  # type: ignore[no-untyped-def]
        if issubclass(kind, KeyboardInterrupt):
            sys.stderr.flush()
            os._exit(130)  # nothing has started yet: no cleanup to run
        previous(kind, value, tb)

    return hook


if sys.argv and os.path.basename(sys.argv[0]) == "rockroll":  # the console script (rockroll.cli.main:main)
    sys.excepthook = _quiet_interrupt(sys.excepthook)
