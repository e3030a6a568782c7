"""Where code that needs a sandbox gets one when it is not its own to start: the process's provider.

A code reward (:mod:`rockroll.agentrl.rewards.code`) runs each answer in a sandbox. Run locally it starts
a :class:`~rockroll.sandbox.manager.SandboxManager` of its own; inside a control plane's job worker it
must not (the worker's own confinement would leave such a sandbox weaker than the server's: no nested
namespaces, no cgroups, the worker's uid), so the worker installs a provider
(:func:`set_default_provider`) whose sandboxes are the server's, started for the job's owner at the
server's isolation (:mod:`rockroll.api.jobs.sandboxes`). :func:`default_provider` is what such code asks.

A provider is the part of :class:`~rockroll.sandbox.manager.SandboxManager` these users call: ``create(spec)``
returns a sandbox with ``id``, ``state`` and ``exec(cmd, *, stdin, timeout_s, max_output)``;
``delete(sandbox_id)`` stops it.
"""

from __future__ import annotations

from typing import Any, Protocol

from rockroll.sandbox.base import ExecResult, SandboxSpec

__all__ = ["SandboxProvider", "ProvidedSandbox", "set_default_provider", "default_provider"]


class ProvidedSandbox(Protocol):
    """A sandbox a provider handed out."""

    id: str

    @property
    def state(self) -> Any: ...

    def exec(
        self, cmd: str | list[str], *, stdin: str | None = None, timeout_s: float = 60.0, max_output: int = 200_000
    ) -> ExecResult: ...


class SandboxProvider(Protocol):
    """Starts and stops sandboxes for code that does not own a manager."""

    def create(self, spec: SandboxSpec) -> ProvidedSandbox: ...

    def delete(self, sandbox_id: str) -> None: ...


_DEFAULT: list[SandboxProvider] = []


def set_default_provider(provider: SandboxProvider | None) -> None:
    """Make ``provider`` this process's (None: none, code starts its own sandboxes)."""
    _DEFAULT.clear()
    if provider is not None:
        _DEFAULT.append(provider)


def default_provider() -> SandboxProvider | None:
    """This process's provider, if one was installed."""
    return _DEFAULT[0] if _DEFAULT else None
