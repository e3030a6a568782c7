"""No sandbox outlives the command that owns it: an exit hook for managers left open.

Every :class:`~rockroll.sandbox.manager.SandboxManager` registers itself here (:func:`track`). When the
interpreter exits with managers still open (an uncaught Ctrl-C, ``sys.exit``, the end of a script
that forgot ``close()``), an :mod:`atexit` hook closes them, stopping their sandboxes.

SIGTERM normally kills Python without running exit hooks or ``finally`` blocks, so the first
manager also turns SIGTERM into ``SystemExit(143)`` in the main thread, exactly like Ctrl-C unwinds
the stack, **only** while SIGTERM still has its default action (a program with its own handler,
like uvicorn, keeps it). :func:`exit_on_sigterm` installs it explicitly.

After SIGKILL nothing can run: the next manager of the same name (and database) takes the lease
over at once (:mod:`rockroll.sandbox.lease`) and reconciles, removing or adopting what was left.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
import weakref
from types import FrameType
from typing import Any

__all__ = ["track", "close_open_managers", "exit_on_sigterm"]

log = logging.getLogger(__name__)

_open: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
_hooked = False


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def exit_on_sigterm(*, force: bool = False) -> bool:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread; True when installed.

    Without ``force`` only a default (``SIG_DFL``) SIGTERM disposition is replaced. Does nothing
    outside the main thread (Python only lets it set handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if not force and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise_exit)
    return True


def close_open_managers() -> int:
    """Close every manager still open, stopping its sandboxes; return how many were closed."""
    with _lock:
        managers = list(_open)
    closed = 0
    for m in managers:
        if getattr(m, "_closed", True):
            continue
        try:
            m.close()
            closed += 1
        except Exception as e:  # noqa: BLE001 - exiting: try the others
            log.warning("cannot close sandbox manager %s at exit: %s", getattr(m.config, "name", "?"), e)
    return closed


def track(manager: Any) -> None:
    """Register ``manager`` for the exit hook (installed, with the SIGTERM handler, on first use)."""
    global _hooked
    with _lock:
        _open.add(manager)
        first, _hooked = not _hooked, True
    if first:
        atexit.register(close_open_managers)
        exit_on_sigterm()
