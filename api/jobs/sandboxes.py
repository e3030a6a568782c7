"""Sandboxes a job worker asks the server for: where a code reward inside a job runs its answers.

A job worker is confined (:mod:`rockroll.sandbox.confine_worker`): no nested namespaces, no cgroups of
its own, one uid for every job. A sandbox it started itself would be weaker than the server's (the
attack of issue 48: ``isolation: none``, the host's network, no memory cap, a child left alive), so it
starts none: its provider (:mod:`rockroll.api.jobs.worker_sandboxes`) sends ``sbx_create``, ``sbx_exec``
and ``sbx_delete`` requests, and :class:`JobSandboxes` serves them here with the server's sandboxes, at
the server's isolation (``min_isolation``), for the job's owner (each counts against the owner's
sandbox quota and shows in the owner's ``GET /v1/sandboxes``).

Bounds: at most :data:`MAX_PER_JOB` at once per job; the spec's memory, pids and CPU clamped to the
server's caps; never a network; a command's stdin, output and time limit bounded; a sandbox id the job
did not create is not found. Every sandbox of a job is deleted when the job ends.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from rockroll.envs.json_types import JSONValue
from rockroll.sandbox.confine import sandbox_user
from rockroll.sandbox.confine_worker import can_confine_workers
from rockroll.sandbox.confinement import IsolationTooWeak, check, resolve_minimum
from rockroll.sandbox.errors import CapacityError, SandboxNotFound

__all__ = ["JobSandboxes", "JobConfinement", "SandboxSource", "MAX_PER_JOB", "OPS"]

#: sandboxes one job holds at once
MAX_PER_JOB = 8
#: the requests of a worker's provider
OPS = ("sbx_create", "sbx_exec", "sbx_delete")
_MAX_STDIN = 1024 * 1024
_MAX_OUTPUT = 1024 * 1024


class SandboxSource(Protocol):
    """Where the server's sandboxes come from (the placement): an owner's new one, and its end."""

    def create_sandbox(self, owner: str | None = None, **fields: Any) -> Any: ...

    def delete(self, sandbox_id: str) -> None: ...


class JobSandboxes:
    """The sandboxes of one job (module docstring); ``caps``: the server's ``Settings``."""

    def __init__(self, source: SandboxSource, owner: str, caps: Any) -> None:
        self.source, self.owner, self.caps = source, owner, caps
        self._boxes: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.created = 0
        self.levels: set[str] = set()  # the isolation levels its sandboxes reported

    def handle(self, op: str, args: dict[str, JSONValue]) -> object:
        if op == "sbx_create":
            return self._create(args)
        box_id = args.get("id")
        with self._lock:
            box = self._boxes.get(box_id) if isinstance(box_id, str) else None
        if box is None:
            raise SandboxNotFound(str(box_id)[:80])
        if op == "sbx_delete":
            with self._lock:
                self._boxes.pop(box.id, None)
            self.source.delete(box.id)
            return None
        return self._exec(box, args)

    def _number(self, args: dict[str, JSONValue], key: str, default: float, cap: float) -> float:
        value = args.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise TypeError(f"{key} must be a positive number")
        return min(float(value), float(cap))

    def _create(self, args: dict[str, JSONValue]) -> dict[str, object]:
        with self._lock:
            if len(self._boxes) >= MAX_PER_JOB:
                raise CapacityError(len(self._boxes), MAX_PER_JOB, "sandboxes of this job")
        c = self.caps
        fields = {
            "name": "job-code",
            "memory_mb": int(self._number(args, "memory_mb", 512, c.max_memory_mb)),
            "pids_limit": int(self._number(args, "pids_limit", 256, c.max_pids)),
            "cpus": self._number(args, "cpus", 1.0, c.max_cpus),
            "network": False,
        }
        box = self.source.create_sandbox(owner=self.owner, **fields)
        extra = box.handle.extra if box.handle is not None else {}
        with self._lock:
            self._boxes[box.id] = box
            self.created += 1
            self.levels.add(str(extra.get("level", "unknown")))
        return {"id": box.id, "level": str(extra.get("level", "")), "isolation": str(extra.get("isolation", ""))}

    def _exec(self, box: Any, args: dict[str, JSONValue]) -> dict[str, Any]:
        cmd, stdin = args.get("cmd"), args.get("stdin")
        if not (isinstance(cmd, str) or (isinstance(cmd, list) and all(isinstance(a, str) for a in cmd))):
            raise TypeError("cmd must be text or a list of texts")
        if stdin is not None and (not isinstance(stdin, str) or len(stdin) > _MAX_STDIN):
            raise TypeError(f"stdin must be text of at most {_MAX_STDIN} characters")
        timeout = self._number(args, "timeout_s", 60.0, self.caps.max_exec_timeout_s)
        max_output = int(self._number(args, "max_output", 200_000, _MAX_OUTPUT))
        result = box.exec(cmd, stdin=stdin, timeout_s=timeout, max_output=max_output)
        return dict(result.to_dict())

    def close(self) -> None:
        """Delete every sandbox the job still holds (its end)."""
        with self._lock:
            boxes, self._boxes = list(self._boxes), {}
        for box_id in boxes:
            try:
                self.source.delete(box_id)
            except Exception:  # noqa: BLE001, S112 - a sandbox gone already is what we want
                continue


class JobConfinement:
    """The confinement rule for a server's jobs (:mod:`rockroll.sandbox.confinement`): the sandboxes they
    get (``source``, bounded by ``caps``: the server's ``Settings``) and the isolation their workers need.

    ``min_isolation`` is the server's setting. Workers pass its resolved level on to the worker
    (no weaker sandbox starts there). A worker itself must be confined by bubblewrap when that minimum
    asks for more than ``none`` and, for ``strongest``, when this machine can confine workers (root,
    bubblewrap, ``setpriv``, the job user): a worker that would run weaker fails its job with
    :class:`~rockroll.sandbox.confinement.IsolationTooWeak`'s message instead of running.
    """

    def __init__(self, source: SandboxSource | None, caps: Any, min_isolation: str = "strongest") -> None:
        self.source, self.caps, self.min_isolation = source, caps, min_isolation

    def for_job(self, owner: str) -> JobSandboxes | None:
        return None if self.source is None else JobSandboxes(self.source, owner, self.caps)

    def passed_on(self) -> str:
        """The level a job worker's own sandboxes would need (:data:`rockroll.sandbox.confinement.ENV`)."""
        return resolve_minimum(self.min_isolation)

    def worker_problem(self, confined: bool, job_user: str) -> str:
        """``''`` when a worker (``confined`` by bubblewrap or not) may run, else why not."""
        level = "confined" if confined else "none"
        minimum = self.min_isolation
        if minimum == "strongest":
            can = bool(job_user) and sandbox_user(job_user) is not None and not can_confine_workers()
            minimum = "confined" if can else "none"
        try:
            check(level, minimum, what="job worker")
        except IsolationTooWeak as e:
            return str(e)
        return ""
