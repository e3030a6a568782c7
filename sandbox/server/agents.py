"""Who runs agent code in a sandbox: one unprivileged uid per session, one for ``exec``, none the server's.

The backend starts the server with the capabilities to change uids (``CAP_SETUID``, ``CAP_SETGID``,
``CAP_SETPCAP``, ``CAP_KILL``, ``CAP_CHOWN`` and no others) and names, in the environment:

* ``ROCKROLL_AGENT_UID``: the first agent uid, ``B``. The sandbox's ``exec`` calls (and its file
  calls) act as ``B`` in the workspace, which the backend made ``B``'s (0700). Env session ``n``
  (``1 <= n <= max_sessions``) acts as ``B + n`` in ``<server dir>/sessions/<n>``, a 0700 folder
  of its own, made when the session first runs agent code and wiped (its processes killed first)
  when the session closes, before the slot serves another session.
* ``ROCKROLL_AGENT_PIDS``: the ``RLIMIT_NPROC`` of every agent command (per agent uid), the
  sandbox's pids limit less what the server keeps for itself (:func:`rockroll.sandbox.confine.agent_pids`):
  a fork bomb in a command fails that command ("Cannot fork") while the server still starts the
  threads it answers with. Each sandbox gets agent uids of its own (a random base), since the
  kernel counts a uid's processes across the whole host.
* ``ROCKROLL_SERVER_DIR``: a folder of the server's (0711), holding ``sessions/`` and the server's
  own files (``.rockroll/``, 0711: custom env plugins, which agent uids may read, as a session's
  custom env worker must, but never list or write).

Every uid here is checked: never 0, never the server's own. Where the variables are missing or
the server lacks the capabilities (an unconfined process sandbox, a test server in a thread),
:attr:`Agents.mode` is ``"none"`` and agent code runs as the server, as before; the server's
``health`` says which (``agent_isolation``).

Threat model: agent commands (bash, tests) and custom env code are untrusted, the server and
rockroll's own envs are not: a custom env's session runs in a worker process as the session's uid
(:mod:`rockroll.sandbox.server.worker_env`), never in the server.
"""

from __future__ import annotations

import os
import threading

from rockroll.envs.agent_identity import AgentIdentity, kill_uid, wipe

__all__ = ["Agents", "AGENT_UID_ENV", "AGENT_PIDS_ENV", "SERVER_DIR_ENV", "NEEDED_CAPS"]

AGENT_UID_ENV = "ROCKROLL_AGENT_UID"
AGENT_PIDS_ENV = "ROCKROLL_AGENT_PIDS"
SERVER_DIR_ENV = "ROCKROLL_SERVER_DIR"
#: capability numbers: CAP_CHOWN 0, CAP_KILL 5, CAP_SETGID 6, CAP_SETUID 7, CAP_SETPCAP 8
NEEDED_CAPS = (0, 5, 6, 7, 8)


def _effective_caps() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


class Agents:
    """The agent identities of one sandbox (see the module docstring)."""

    def __init__(self, workspace: str, max_sessions: int) -> None:
        self.mode = "none"
        self.exec_identity: AgentIdentity | None = None
        self.server_dir = os.environ.get(SERVER_DIR_ENV, "")
        self._lock = threading.Lock()
        self._free: list[int] = []
        self.max_procs = int(os.environ.get(AGENT_PIDS_ENV, "0")) or None
        first = os.environ.get(AGENT_UID_ENV, "")
        if self.server_dir:
            os.makedirs(self.server_dir, mode=0o711, exist_ok=True)
            own = os.path.join(self.server_dir, ".rockroll")
            os.makedirs(own, mode=0o711, exist_ok=True)
            os.chmod(own, 0o711)  # custom env workers (agent uids) read the plugins in it, none lists or writes it
        caps = _effective_caps()
        if not (first and self.server_dir and all(caps >> c & 1 for c in NEEDED_CAPS)):
            return
        self.base = int(first)
        top = self.base + max_sessions
        if self.base <= 0 or top >= 0xFFFFFFFF or os.geteuid() in range(self.base, top + 1):
            raise ValueError(f"agent uids {self.base}..{top} must be above 0 and exclude the server's uid")
        self.sessions_dir = os.path.join(self.server_dir, "sessions")
        os.makedirs(self.sessions_dir, mode=0o711, exist_ok=True)
        os.chmod(self.sessions_dir, 0o711)
        self.exec_identity = AgentIdentity(self.base, self.base, os.path.realpath(workspace), self.max_procs)
        self._free = list(range(max_sessions, 0, -1))
        self.mode = "uid"

    def acquire(self) -> AgentIdentity | None:
        """A fresh identity for one session (its folder empty, no process of its uid left), or None."""
        if self.mode != "uid":
            return None
        with self._lock:
            if not self._free:
                raise RuntimeError("no agent uid left: more sessions than the sandbox's max_sessions")
            slot = self._free.pop()
        home = os.path.join(self.sessions_dir, str(slot))
        ident = AgentIdentity(self.base + slot, self.base + slot, home, self.max_procs)
        try:
            self._clear(ident)
            os.mkdir(ident.home, 0o700)
            os.chown(ident.home, ident.uid, ident.gid)
        except BaseException:
            with self._lock:
                self._free.append(slot)
            raise
        return ident

    def release(self, ident: AgentIdentity | None) -> None:
        """End a session's identity: kill its processes, remove its folder, free its slot."""
        if ident is None or self.mode != "uid":
            return
        self._clear(ident)
        with self._lock:
            self._free.append(ident.uid - self.base)

    @staticmethod
    def _clear(ident: AgentIdentity) -> None:
        kill_uid(ident.uid)
        if os.path.lexists(ident.home):
            wipe(ident.home, ident)
