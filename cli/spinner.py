"""A spinner for commands that take more than a moment (loading a model, plotting, starting a sandbox).

:func:`working` shows a rich spinner with a message on stderr when stderr is a terminal (``update``
changes the message); elsewhere (a pipe, CI, a job's log) it writes the message once as a plain line,
so a slow command never sits silent. stdout stays clean for what the command prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

__all__ = ["working"]


@contextmanager
def working(message: str) -> Iterator[Callable[[str], None]]:
    """Show ``message`` while the block runs; yields ``update(text)`` to change it."""
    console = Console(stderr=True)
    if not console.is_terminal:
        sys.stderr.write(message + " ...\n")
        sys.stderr.flush()
        yield lambda _text: None
        return
    with console.status(message, spinner="dots") as status:
        yield lambda text: status.update(text)
