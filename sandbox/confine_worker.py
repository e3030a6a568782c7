"""Confinement of a long-lived worker process started by root (the control plane's job workers).

A job worker (:mod:`rockroll.api.jobs.worker`) runs the server's own job code on an owner's untrusted
config. :func:`worker_argv` runs it the way :mod:`rockroll.sandbox.confine` runs process sandboxes,
with two differences that a job needs:

* ``bwrap`` as root without a user namespace (new pid, ipc, uts and cgroup namespaces, all
  capabilities dropped but the three ``setpriv`` uses), the host's root filesystem read-only, private
  ``/tmp`` and ``/run``, ``/root`` and ``/home`` hidden; the interpreter, rockroll's sources and the
  admin's model folders are mounted back read-only (the same :func:`~rockroll.sandbox.confine._mount_back`
  as sandboxes), and so is ``/etc/resolv.conf`` where it points into a hidden tree;
* the job root (every owner's folder and the server's job logs) is covered by an empty tmpfs where the
  hidden trees do not already cover it, and only the owner's own folder is bound back, **writable, at
  its own path** (the effective config names absolute paths inside it);
* then ``setpriv`` drops to the unprivileged user (no supplementary groups, empty bounding,
  inheritable and ambient capability sets, ``no_new_privs``) and the worker starts in the owner's
  folder (``env --chdir``: bwrap's own ``--chdir`` runs as root without ``CAP_DAC_OVERRIDE`` and cannot
  enter a 0700 folder of another user).

The network namespace is **shared** with the host: an eval job's engine is reached over HTTP at an
admin-allowlisted URL (``Settings.job_engine_urls``), and a private namespace would cut it off. The
worker runs no code of the owner's (its envs are played in sandboxes through the server, its URLs and
paths are checked before it starts), so the open network is the server's job code's, bounded by the
allowlist; it holds no token of the server's.

Threat model: what a job's config can make the worker do runs as an unprivileged user that cannot read
``/etc/shadow``, root's files, the server's database or another owner's job folder (not in its view),
cannot write any host file but its owner's folder, and cannot signal processes outside its pid
namespace (the process sandboxes run as the same user).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from rockroll.sandbox.confine import _HIDDEN, _mount_back
from rockroll.sandbox.isolation import server_paths

__all__ = ["can_confine_workers", "worker_argv"]

_RESOLV = "/etc/resolv.conf"


def can_confine_workers() -> str:
    """``''`` when :func:`worker_argv` can work here (root, ``bwrap``, ``setpriv``, ``env``), else why not."""
    if os.geteuid() != 0:
        return "the server does not run as root"
    missing = [tool for tool in ("bwrap", "setpriv", "env") if shutil.which(tool) is None]
    return f"{', '.join(missing)} not found" if missing else ""


def _under_hidden(path: str) -> str | None:
    return next((h for h in _HIDDEN if path == h or path.startswith(h + "/")), None)


def _parents(path: str) -> list[str]:
    """``--dir`` lines (0755) for the parents of ``path`` that a hidden tree or a covered root leaves out."""
    top = _under_hidden(path)
    if top is None:
        return []
    out: list[str] = []
    parts = Path(path).relative_to(top).parts[:-1]
    for i in range(len(parts)):
        out += ["--perms", "0755", "--dir", os.path.join(top, *parts[: i + 1])]
    return out


def worker_argv(
    cmd: list[str],
    *,
    user: tuple[int, int],
    work_dir: str | os.PathLike[str],
    cover: str | os.PathLike[str] | None = None,
    readable: Iterable[str] = (),
) -> list[str]:
    """The command line that runs ``cmd`` confined (module docstring), in ``work_dir`` (bound writable).

    ``cover``: a folder hidden behind an empty tmpfs before ``work_dir`` is bound back (the job root
    that holds every owner's folder); ``readable``: host paths mounted back read-only, besides what the
    interpreter ``cmd[0]`` needs (its prefixes, rockroll's sources, ``PYTHONPATH``: as for sandboxes).
    """
    uid, gid = user
    work = os.path.realpath(work_dir)
    bwrap = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]
    bwrap += ["--cap-drop", "ALL"]
    bwrap += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]  # setpriv's
    bwrap += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for hidden in _HIDDEN:  # /tmp stays writable for all (sticky), private to the worker
        bwrap += (["--perms", "1777"] if hidden == "/tmp" else []) + ["--tmpfs", hidden]
    wanted = set(readable) | server_paths(cmd[0], {})
    wanted.add(_RESOLV)  # mounted back only where it links into a hidden tree (/run: systemd-resolved)
    bwrap += _mount_back(wanted)
    if cover is not None:
        covered = os.path.realpath(cover)
        if _under_hidden(covered) is None and os.path.isdir(covered):
            bwrap += ["--perms", "0711", "--tmpfs", covered]
    bwrap += _parents(work) + ["--bind", work, work, "--chdir", "/", "--"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]
    drop += ["--bounding-set=-all", "--no-new-privs", "--", "env", f"--chdir={work}", "--"]
    return bwrap + drop + list(cmd)
