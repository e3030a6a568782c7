"""What running a command returns, wherever it ran: :class:`ExecResult`.

The one command-result type of rockroll. It lives in the lowest layer because envs consume it (the
SWE env's executors, local or sandboxed, return it); the sandbox layer re-exports it
(:mod:`rockroll.sandbox.results`) for its ``exec`` calls, and the API answers :meth:`ExecResult.to_dict`.
A timeout or an OOM kill is an outcome recorded here, not an exception.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ExecResult"]


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command (timeouts and OOM kills are outcomes, not errors).

    Attributes:
        exit_code: the command's exit status (negative: killed by that signal, where reported so).
        stdout: standard output, decoded as UTF-8 (invalid bytes replaced).
        stderr: standard error, likewise.
        timed_out: the command was killed at its time limit.
        truncated: some output beyond the capture limit was dropped.
        oom_killed: the command was killed for running out of memory.
        duration_s: wall time of the command.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    oom_killed: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Exit status 0 within the time limit."""
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecResult:
        """Build one from a mapping with (some of) the field names; other keys are ignored."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def to_dict(self) -> dict[str, Any]:
        """The fields plus ``ok``, as plain JSON types (what the API's exec route answers)."""
        return {**asdict(self), "ok": self.ok}
