"""Who a job worker runs as, and how it is started (issue 13 item 4).

A job worker runs the server's job code on an owner's untrusted config, so it should not have the
server's rights. :func:`find_worker_identity` picks, once per server, the strongest of:

1. **confined** (the server is root, ``Settings.job_user`` exists, ``bwrap`` and ``setpriv`` work): the
   worker runs under :func:`rockroll.sandbox.confine_worker.worker_argv` as that user, seeing only its
   owner's folder (writable), the interpreter and sources (read-only), with the host's ``/root``,
   ``/home``, ``/tmp``, ``/run`` and the other owners' folders out of view. This works where the
   interpreter lives in root's 0700 home (pyenv under ``/root``): it is mounted back read-only;
2. **as the user only** (no bubblewrap, but the user can run the interpreter where it is): the worker
   is started as that user, seeing what that user may read on the host;
3. **the server's own user** (not root, no such user, or neither works): the fallback. It is said
   out loud: a warning in the server's log, a line in every job's log and ``JobRunner.worker_note``.

:func:`worker_command` is the command line and ``Popen`` arguments of each case.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rockroll.sandbox.confine import sandbox_user
from rockroll.sandbox.confine_worker import can_confine_workers, worker_argv
from rockroll.sandbox.confinement import ENV as MIN_ISOLATION_ENV

__all__ = ["WorkerIdentity", "find_worker_identity", "worker_identity", "worker_command", "worker_env", "WORKER"]

log = logging.getLogger("rockroll.api")
WORKER = [sys.executable, "-m", "rockroll.api.jobs.worker"]
_PROBE = [sys.executable, "-c", "import rockroll.api.jobs.worker"]
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE")


class WorkerIdentity(NamedTuple):
    """The user a job worker runs as; ``confined``: under bubblewrap (``job_root`` covered, ``readable``
    mounted back), else started as the user directly."""

    uid: int
    gid: int
    name: str
    confined: bool = False
    job_root: str = ""
    readable: tuple[str, ...] = ()

    def describe(self) -> str:
        how = "confined by bwrap" if self.confined else "not confined by bwrap: it reads what its user may read"
        return f"{self.name} (uid {self.uid}), {how}"


def worker_env(home: Path, min_isolation: str = "", keys: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: a few harmless variables of the server's, ``HOME`` its job folder, the
    server's minimum isolation (:data:`rockroll.sandbox.confinement.ENV`: no weaker sandbox starts there) and
    ``keys``, the API keys its config names that ``job_api_key_envs`` lists
    (:func:`rockroll.api.jobs.outbound.key_env_values`; they never override the fixed variables)."""
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    env.update({k: v for k, v in (keys or {}).items() if not k.startswith("ROCKROLL_")})
    env.update(HOME=str(home), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    if min_isolation:
        env[MIN_ISOLATION_ENV] = min_isolation
    return env


def worker_command(cmd: list[str], identity: WorkerIdentity | None, cwd: Path) -> tuple[list[str], dict[str, Any]]:
    """The argv and the extra ``Popen`` keyword arguments that start ``cmd`` as ``identity`` in ``cwd``."""
    if identity is None:
        return list(cmd), {}
    if identity.confined:
        argv = worker_argv(
            cmd, user=(identity.uid, identity.gid), work_dir=cwd, cover=identity.job_root or None,
            readable=identity.readable,
        )  # fmt: skip
        return argv, {}
    return list(cmd), {"user": identity.uid, "group": identity.gid, "extra_groups": []}


def _probe(ident: WorkerIdentity, probe_dir: Path) -> str:
    """``''`` when ``ident`` starts the worker's interpreter and imports it in ``probe_dir``, else why not."""
    argv, kwargs = worker_command(_PROBE, ident, probe_dir)
    try:
        probe = subprocess.run(
            argv, cwd=probe_dir, env=worker_env(probe_dir), capture_output=True, timeout=120, **kwargs
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    return "" if probe.returncode == 0 else probe.stderr.decode(errors="replace").strip()[-300:] or "failed"


def find_worker_identity(
    user: str, job_root: Path, *, readable: Iterable[str | os.PathLike[str]] = ()
) -> tuple[WorkerIdentity | None, str]:
    """The identity job workers of ``job_root`` run as (module docstring), and a note saying how or why not.

    ``readable``: host folders a job may read besides the interpreter and sources (``job_model_dirs``).
    ``None`` means the server's own user; the note then says why (and is logged as a warning).
    """
    if not user:
        return None, "job_user is empty: job workers run as the server's user"
    ids = sandbox_user(user)  # the lookup process sandboxes use: root, the user exists, not uid 0
    if ids is None:
        why = "the server does not run as root" if os.geteuid() != 0 else f"user {user} does not exist (or is root)"
        return None, f"job workers run as the server's user: {why}"
    job_root.mkdir(parents=True, exist_ok=True)
    why_not: list[str] = []
    with tempfile.TemporaryDirectory(prefix=".probe-", dir=job_root) as probe:
        os.chown(probe, *ids)
        os.chmod(job_root, os.stat(job_root).st_mode | 0o111)  # the users' folders are reached through it
        extra = tuple(os.path.realpath(p) for p in readable)
        confined = WorkerIdentity(ids[0], ids[1], user, True, str(job_root.resolve()), extra)
        why = can_confine_workers() or _probe(confined, Path(probe))
        if not why:
            return confined, f"job workers run as {confined.describe()}"
        why_not.append(f"bwrap: {why}")
        plain = WorkerIdentity(ids[0], ids[1], user)
        why = _probe(plain, Path(probe))
        if not why:
            note = f"job workers run as {plain.describe()} ({why_not[0]})"
            log.warning("%s", note)
            return plain, note
        why_not.append(f"as {user}: {why}")
    note = f"job workers run as the server's user, unconfined: {user} cannot run {WORKER[0]} ({'; '.join(why_not)})"
    log.warning("%s", note)
    return None, note


def worker_identity(user: str, probe_dir: Path) -> WorkerIdentity | None:
    """:func:`find_worker_identity` without its note (``probe_dir``: the job root)."""
    return find_worker_identity(user, probe_dir)[0]
