"""The job worker's sandbox provider: the server's sandboxes, driven from the worker.

Installed by :func:`rockroll.api.jobs.worker.main` as the process's provider
(:func:`rockroll.sandbox.provider.set_default_provider`), so a code reward of a train job runs its answers
in sandboxes the server starts for the job's owner at the server's isolation
(:mod:`rockroll.api.jobs.sandboxes`), never in one the worker would start itself.
"""

from __future__ import annotations

from typing import Any, Protocol

from rockroll.envs.exec_result import ExecResult
from rockroll.sandbox.base import SandboxSpec
from rockroll.sandbox.managed import SandboxState

__all__ = ["RemoteSandboxes", "RemoteSandbox"]


class Channel(Protocol):
    """The worker's channel to the server (:class:`rockroll.api.jobs.worker.Channel`): one request, its reply."""

    def call(self, op: str, **args: object) -> Any: ...


class RemoteSandbox:
    """One sandbox of the server (``level``: the isolation it reported)."""

    state = SandboxState.READY

    def __init__(self, channel: Channel, info: Any) -> None:
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            raise TypeError(f"the server answered a sandbox request with {info!r:.200}")
        self._channel = channel
        self.id = str(info["id"])
        self.level = str(info.get("level", ""))
        self.isolation = str(info.get("isolation", ""))

    def exec(
        self, cmd: str | list[str], *, stdin: str | None = None, timeout_s: float = 60.0, max_output: int = 200_000
    ) -> ExecResult:
        out = self._channel.call(
            "sbx_exec", id=self.id, cmd=cmd, stdin=stdin, timeout_s=timeout_s, max_output=max_output
        )  # fmt: skip
        if not isinstance(out, dict):
            raise TypeError(f"the server answered an exec with {out!r:.200}")
        return ExecResult.from_dict(out)


class RemoteSandboxes:
    """Starts and stops the job's sandboxes through the server (a :class:`~rockroll.sandbox.provider.SandboxProvider`)."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    def create(self, spec: SandboxSpec) -> RemoteSandbox:
        info = self._channel.call("sbx_create", memory_mb=spec.memory_mb, pids_limit=spec.pids_limit, cpus=spec.cpus)
        return RemoteSandbox(self._channel, info)

    def delete(self, sandbox_id: str) -> None:
        self._channel.call("sbx_delete", id=sandbox_id)
