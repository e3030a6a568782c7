"""The lifecycle of a job: ``queued`` -> ``running`` -> ``succeeded`` | ``failed`` | ``cancelled``.

A StrEnum, so each state is also its string: records in ``api_jobs``, JSON answers and the web page
show the same words as before, and ``job["state"] in TERMINAL_STATES`` works on a plain answer.
Kept apart from :mod:`rockroll.api.jobs.runner` so the client SDK can use it without the server's imports.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["JobState", "TERMINAL_STATES"]


class JobState(StrEnum):
    """Where a job is (see the module docstring)."""

    QUEUED = "queued"  #: waiting for a worker (queued again after a server restart)
    RUNNING = "running"  #: a worker runs it (a server restart marks it failed)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  #: ``error`` says why
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """Whether the job is over (succeeded, failed or cancelled)."""
        return self in TERMINAL_STATES


#: the states a job never leaves
TERMINAL_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
