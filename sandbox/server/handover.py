"""A handed-over sandbox waits a bounded time for a manager to adopt it, then stops by itself.

The process backend's manager hands a sandbox over (``k`` on its lifeline, :mod:`rockroll.sandbox.process`)
when it closes with ``stop_sandboxes=False``: the server then outlives it, for the next manager on
the same database to adopt. If none comes within ``--adopt-timeout-s`` (default :data:`ADOPT_TIMEOUT_S`),
the server ends the way SIGTERM ends it, agent commands included, and its sandbox (the pid namespace,
the process group) goes with it: a forgotten sandbox does not run forever.

Adoption is a held connection: the adopting manager calls ``POST /adopt`` on the socket and keeps the
connection open for as long as it owns the sandbox (:mod:`rockroll.sandbox.handover`). While one is
held the countdown stands still; when the last one ends (the manager hands it over again, stops, or
dies, SIGKILL included: the kernel closes its descriptor) the countdown starts again.

Threat model: agent code must not keep its own sandbox alive by adopting it. Only a caller outside
the sandbox counts: with a pid namespace of its own (bubblewrap, ``unshare``, ``--private-pids``) a
caller the server can see at all (``SO_PEERCRED`` names its pid) is inside; without one, a caller
descended from the server is. Confined agents cannot reach the socket in the first place (0600).
Without a pid namespace an agent that leaves the server's process tree is outside the sandbox's reach
anyway: this bounds what the sandbox itself leaves running, not what escaped it.
"""

from __future__ import annotations

import math
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from io import BufferedIOBase

__all__ = ["ADOPT_TIMEOUT_S", "Handover", "peer_pid"]

#: seconds a handed-over sandbox waits for a manager before it stops (0: forever)
ADOPT_TIMEOUT_S = 600.0
_UCRED = struct.Struct("3i")  # pid, uid, gid


def peer_pid(conn: socket.socket) -> int:
    """The pid of the process at the other end of unix socket ``conn`` as this process sees it (0: not
    in this pid namespace), or -1 when the kernel does not say."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (OSError, AttributeError):
        return -1
    return _UCRED.unpack(raw)[0]


def _descends_from(pid: int, root: int) -> bool:
    """Whether process ``pid`` is ``root`` or one of its descendants (read from ``/proc``)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        if pid == root:
            return True
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return pid == root


class Handover:
    """The countdown of one server (see the module docstring).

    Args:
        timeout_s: seconds without a holder, after the handover, before ``expire`` runs (0: never).
        private_pids: the server has a pid namespace of its own (every process it sees is the sandbox's).
        expire: what ends the server (the SIGTERM way out).
    """

    def __init__(self, timeout_s: float, *, private_pids: bool, expire: Callable[[], None]) -> None:
        self.timeout_s = timeout_s
        self.private_pids = private_pids
        self._expire = expire
        self._cond = threading.Condition()
        self._handed_over = False
        self._holders = 0
        self._deadline = math.inf

    @property
    def holders(self) -> int:
        """Managers holding the sandbox now."""
        return self._holders

    def handed_over(self) -> None:
        """The lifeline said ``k``: the countdown starts (unless a manager holds the sandbox already)."""
        with self._cond:
            self._handed_over = True
            self._restart()
        if self.timeout_s > 0:
            threading.Thread(target=self._watch, name="handover", daemon=True).start()

    def from_manager(self, conn: socket.socket) -> bool:
        """Whether the caller on ``conn`` is outside the sandbox (see the module docstring)."""
        pid = peer_pid(conn)
        if pid == 0:
            return True
        if pid < 0 or self.private_pids:
            return False
        return not _descends_from(pid, os.getpid())

    def hold(self, rfile: BufferedIOBase) -> None:
        """Count one holder until its connection (``rfile``) says anything or ends (blocks until then)."""
        with self._cond:
            self._holders += 1
        try:
            rfile.read(1)
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                self._holders -= 1
                self._restart()

    def _restart(self) -> None:
        if self._handed_over and self._holders == 0:
            self._deadline = time.monotonic() + self.timeout_s
            self._cond.notify_all()

    def _watch(self) -> None:
        with self._cond:
            while self._holders or time.monotonic() < self._deadline:
                left = self._deadline - time.monotonic()
                self._cond.wait(None if self._holders else min(max(0.05, left), 3600.0))
        print(f"handed over and not adopted within {self.timeout_s:g} s: stopping", file=sys.stderr, flush=True)
        self._expire()
