"""Typed shapes of the API's JSON answers, as returned by :class:`rockroll.client.sdk.Client`.

They are the routes' response models, defined once in :mod:`rockroll.client.responses`; this module
re-exports the ones the client's methods return.
"""

from __future__ import annotations

from rockroll.client.responses import (
    EnvInfo,
    ExecOutput,
    FileWritten,
    Health,
    JobInfo,
    Overview,
    ResetResult,
    SandboxInfo,
    SessionInfo,
    SessionOpened,
    StepResult,
)

__all__ = [
    "EnvInfo", "SandboxInfo", "ExecOutput", "FileWritten", "SessionInfo", "SessionOpened", "ResetResult",
    "StepResult", "JobInfo", "Health", "Overview",
]  # fmt: skip
