"""Stop what a state directory's process sandboxes left behind, without a server: ``rockroll sandbox prune``.

A server stopped without ``stop_sandboxes_on_exit`` leaves its process sandboxes running for the next
server on its database to adopt; one handed over stops by itself after its adopt timeout
(:mod:`rockroll.sandbox.handover`), a ``survive_owner`` one never does, and a sandbox that ended by
itself leaves its folder (socket, log, workspace) and, confined, its cgroups. :func:`prune` finds
both for one state directory and removes them:

* **sandboxes**: the processes :meth:`~rockroll.sandbox.process.ProcessBackend.list_managed` sees for
  every manager name under the directory (its sub-folders, and the ``rockroll.manager`` labels of
  server processes whose command line names the directory), kept only when their command line names
  their own folder there: a sandbox of another state directory with the same manager name is not
  touched. Each is stopped with :meth:`~rockroll.sandbox.process.ProcessBackend.stop` (its process
  group, its folder, its cgroups).
* **folders**: a process sandbox's folder (``<manager>/<id>-g<generation>`` holding its ``server.log``)
  that no process names any more and whose socket nobody serves, removed with its cgroups. A Docker
  sandbox's socket folder (no log there; its server answers) is left alone.

Threat model: run by the operator; it stops **every** sandbox of the directory, so run it when no server
uses that directory (a running server would see its sandboxes die and replace them). Only pids whose
command line carries rockroll's server and the directory are signalled; nothing outside the directory's
sandbox folders is removed.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from rockroll.sandbox.base import SandboxHandle
from rockroll.sandbox.confine import remove_cgroups
from rockroll.sandbox.process import ProcessBackend
from rockroll.sandbox.retry import wait_until

__all__ = ["Leftover", "find_leftovers", "prune"]

_SANDBOX_FOLDER = re.compile(r".+-g\d+")
_SERVER = b"rockroll.sandbox.server"
_STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class Leftover:
    """One thing a state directory still holds: a running sandbox (``pid``) or a folder whose process is gone."""

    manager: str
    sandbox_id: str
    folder: str
    pid: int | None = None  #: the sandbox's outermost process; None: only its folder is left
    handle: SandboxHandle | None = None

    def describe(self) -> str:
        """One line: ``sandbox MANAGER/ID pid N (FOLDER)`` or ``folder FOLDER (no process left)``."""
        if self.pid is None:
            return f"folder {self.folder} (no process left)"
        return f"sandbox {self.manager}/{self.sandbox_id} pid {self.pid} ({self.folder})"


def _check_dir(state_dir: str) -> Path:
    path = Path(os.path.abspath(os.path.expanduser(state_dir)))
    if not path.exists():
        raise ValueError(f"state directory {state_dir!r} does not exist")
    if not path.is_dir():
        raise ValueError(f"{state_dir!r} is not a directory")
    return path


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _names(args: list[str], folder: str) -> bool:
    """Whether a command line names ``folder`` or a path inside it."""
    return any(a == folder or a.startswith(folder + "/") for a in args)


def _manager_names(root: Path) -> set[str]:
    """The sub-folders of ``root`` and the manager labels of server processes that name a path inside it."""
    names = {p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()}
    inside = str(root) + "/"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if _SERVER in raw and inside.encode() in raw:
            args = raw.decode(errors="replace").split("\0")
            names.update(a.split("=", 1)[1] for a in args if a.startswith("rockroll.manager="))
    return {n for n in names if n and "/" not in n}


def find_leftovers(state_dir: str) -> list[Leftover]:
    """The running sandboxes and orphaned sandbox folders of ``state_dir`` (ValueError: not a directory)."""
    root = _check_dir(state_dir)
    return _find(root, ProcessBackend(state_dir=str(root)))


def _find(root: Path, backend: ProcessBackend) -> list[Leftover]:
    running: list[Leftover] = []
    for manager in sorted(_manager_names(root)):
        for h in backend.list_managed(manager):
            folder = str(h.extra.get("dir") or os.path.dirname(h.socket_path))
            if folder.startswith(str(root) + "/") and _names(_cmdline(int(h.ref)), folder):
                running.append(Leftover(manager, h.sandbox_id, folder, int(h.ref), h))
    busy = {lo.folder for lo in running}
    folders = []
    for manager_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        for d in sorted(p for p in manager_dir.iterdir() if p.is_dir() and not p.is_symlink()):
            if _SANDBOX_FOLDER.fullmatch(d.name) and str(d) not in busy and _abandoned(d):
                sid = d.name.rsplit("-g", 1)[0]
                folders.append(Leftover(manager_dir.name, sid, str(d)))
    return running + folders


def _abandoned(folder: Path) -> bool:
    """Whether ``folder`` is a process sandbox's (its server log) whose socket no server answers on."""
    if not (folder / "server.log").is_file():
        return False
    sock = folder / "s.sock"
    if not sock.exists():
        return True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(sock))
        except OSError:
            return True
    return False


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def prune(state_dir: str, *, dry_run: bool = False) -> tuple[list[Leftover], list[Leftover]]:
    """Stop and remove what :func:`find_leftovers` finds (``dry_run``: nothing); returns ``(done, failed)``.

    A sandbox fails when its process is still there after the stop (another user's, without the rights).
    """
    root = _check_dir(state_dir)
    backend = ProcessBackend(state_dir=str(root))
    found = _find(root, backend)
    if dry_run:
        return found, []
    done: list[Leftover] = []
    failed: list[Leftover] = []
    for lo in found:
        if lo.handle is not None and lo.pid is not None:
            backend.stop(lo.handle)  # SIGKILL to its process group (a pid already gone is fine), folder, cgroups
            ok = wait_until(functools.partial(_gone, lo.pid), _STOP_WAIT_S)
        else:
            shutil.rmtree(lo.folder, ignore_errors=True)
            remove_cgroups(f"{lo.manager}.{os.path.basename(lo.folder)}")
            ok = not os.path.exists(lo.folder)
        (done if ok else failed).append(lo)
    return done, failed
