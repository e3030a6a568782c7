"""The one confinement rule: code a user or a model wrote runs only as isolated as the operator requires.

Everything that runs such code (sandbox servers and the agent commands they run, code rewards, SWE
executors, job workers) reaches it through a sandbox backend, and every backend reports the
**isolation level** it gives (:attr:`SandboxBackend.level`, also each handle's ``extra["level"]``):

=============  ==================================================================================
``none``       a plain child process with the starter's rights
``unshare``    new pid and network namespaces; the host's files stay writable
``bwrap``      bubblewrap: every namespace new, the host read-only, seccomp where libseccomp is,
               but the starter's own uid (no cgroup limits when not root)
``confined``   ``bwrap`` started by root: a fresh uid per sandbox (server) and per session (agent
               commands), cgroup memory/pids/CPU limits, seccomp, no network
               (:mod:`rockroll.sandbox.confine`)
``container``  a Docker container (its own namespaces, cgroups, seccomp profile; no network when
               the spec says so); ranked with ``confined``
=============  ==================================================================================

A **minimum** is a level name or ``strongest`` (the strongest level this machine offers the process
backend, :func:`strongest`). A backend below its minimum refuses to start a sandbox with
:class:`IsolationTooWeak`, naming what it got, what is required and the setting to change.

Where minimums come from:

* a control plane serving owners: ``Settings.min_isolation`` (default ``strongest``; the server checks
  its backend at start and refuses to start below it, logs the level and shows it on ``/ui``). The
  operator opts in to weaker sandboxes only by naming a weaker level (``none`` included) there;
* processes it starts to run owners' work (job workers) inherit that minimum through the
  :data:`ENV` variable, so a code reward inside a job worker can never fall back to a weaker local
  sandbox (it runs its code in the server's sandboxes instead: :mod:`rockroll.sandbox.provider`);
* single-user local runs (the main job, ``rockroll train``, tests) set no minimum: a backend weaker
  than this machine's strongest, or ``none``, says so once in a one-line warning and runs.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from rockroll.sandbox.errors import SandboxStartError

__all__ = [
    "LEVELS",
    "MINIMUMS",
    "ENV",
    "IsolationTooWeak",
    "rank",
    "strongest",
    "resolve_minimum",
    "inherited_minimum",
    "check",
    "enforce",
]

log = logging.getLogger("rockroll.sandbox")

#: isolation levels, weakest first (``container`` ranks with ``confined``)
LEVELS = ("none", "unshare", "bwrap", "confined", "container")
_RANK = {"none": 0, "unshare": 1, "bwrap": 2, "confined": 3, "container": 3}
#: what a minimum setting may be
MINIMUMS = ("strongest", "none", "unshare", "bwrap", "confined")
#: the variable a control plane sets for the processes it starts (job workers): their minimum
ENV = "ROCKROLL_MIN_ISOLATION"
_WARNED: set[str] = set()


class IsolationTooWeak(SandboxStartError):
    """A sandbox would be less isolated than the operator's minimum: it is not started."""

    def __init__(self, got: str, minimum: str, *, what: str = "sandbox", setting: str = "min_isolation") -> None:
        super().__init__(
            f"refusing to run the {what} with isolation {got!r}: this deployment requires at least {minimum!r} "
            f"({setting}); give it what that needs (root, bubblewrap, the rockroll-sandbox user: scripts/setup.sh) "
            f"or, as its operator, set {setting} to {got!r} to accept the weaker isolation"
        )
        self.got, self.minimum, self.setting = got, minimum, setting


def rank(level: str) -> int:
    """The strength of ``level`` (0: ``none``); ``ValueError`` for a name that is not a level."""
    try:
        return _RANK[level]
    except KeyError:
        raise ValueError(f"isolation level must be one of {', '.join(LEVELS)}, got {level!r}") from None


def strongest(user: str | None = None) -> str:
    """The strongest level the process backend gets on this machine, as this process (probed once)."""
    from rockroll.sandbox.confine import SANDBOX_USER, sandbox_user
    from rockroll.sandbox.isolation import detect_isolation

    found = detect_isolation()
    if found == "bwrap" and shutil.which("setpriv") and sandbox_user(SANDBOX_USER if user is None else user):
        return "confined"
    return found


def resolve_minimum(minimum: str) -> str:
    """``minimum`` as a level: ``strongest`` becomes :func:`strongest`'s answer here, but never ``none``
    (on a machine that offers no isolation at all, ``none`` must be named: the operator's opt-in)."""
    if minimum not in MINIMUMS:
        raise ValueError(f"min_isolation must be one of {', '.join(MINIMUMS)}, got {minimum!r}")
    if minimum != "strongest":
        return minimum
    best = strongest()
    return "unshare" if best == "none" else best


def inherited_minimum() -> str | None:
    """The minimum a control plane gave this process (:data:`ENV`), or None: a local run."""
    value = os.environ.get(ENV, "").strip()
    return resolve_minimum(value) if value else None


def check(got: str, minimum: str | None, *, what: str = "sandbox", setting: str = "min_isolation") -> None:
    """Raise :class:`IsolationTooWeak` when ``got`` ranks below ``minimum``; with no minimum (a local
    run), warn once when ``got`` is ``none`` or weaker than this machine's strongest."""
    if minimum is not None:
        if rank(got) < rank(resolve_minimum(minimum)):
            raise IsolationTooWeak(got, minimum, what=what, setting=setting)
        return
    best = strongest()
    if (got == "none" or rank(got) < rank(best)) and got not in _WARNED:
        _WARNED.add(got)
        log.warning(
            "a %s runs with isolation %r (this machine offers %r): fine for your own code on your own machine; "
            "a server for others requires its min_isolation (docs/sandboxes.md)", what, got, best,
        )  # fmt: skip


def enforce(backend: Any, minimum: str | None) -> str:
    """Hold ``backend`` (a :class:`~rockroll.sandbox.base.SandboxBackend`) to ``minimum`` (None: no rule, a
    local run): :class:`IsolationTooWeak` when its level is weaker; a process backend checks it again at
    every start. Returns what ``/v1/health`` and ``/ui`` say of the isolation (an accepted weaker one named)."""
    level = str(getattr(backend, "level", "none"))
    if minimum is None:
        return level
    required = resolve_minimum(minimum)
    check(level, minimum, what=f"{getattr(backend, 'name', 'sandbox')} sandbox")
    if hasattr(backend, "min_isolation"):
        backend.min_isolation = required
    best = strongest()
    if rank(required) < rank(best) or level == "none":
        log.warning("min_isolation %s: the operator accepts sandboxes weaker than this machine's %s", minimum, best)
        return f"{level} (min_isolation {minimum}: weaker than this machine's {best} accepted)"
    log.info("sandboxes run with isolation %s (min_isolation %s)", level, minimum)
    return f"{level} (min_isolation {minimum})"
