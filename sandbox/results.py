"""What the in-sandbox server's answers decode into: :class:`ExecResult` and :class:`Health`.

``ExecResult`` is rockroll's one command-result type, defined in :mod:`rockroll.envs.exec_result`
(the SWE env's executors return it too) and re-exported here. Plain frozen dataclasses, so the wire client
(:mod:`rockroll.sandbox.client`) and the backend contract (:mod:`rockroll.sandbox.base`, which
re-exports both) can share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rockroll.envs.exec_result import ExecResult

__all__ = ["ExecResult", "Health"]


@dataclass(frozen=True)
class Health:
    """What a server's ``health`` call reports about its load."""

    boot_id: str
    sessions: int
    max_sessions: int
    cpu_seconds: float
    memory_bytes: int
    uptime_s: float
    pid: int

    @property
    def load(self) -> float:
        """Fraction of session slots in use (what load balancing sorts by)."""
        return self.sessions / max(1, self.max_sessions)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Health:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})
