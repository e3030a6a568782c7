"""Step sequence numbers: each session's steps are numbered 1, 2, 3...; a replay returns the recorded answer.

A client numbers its steps; the agent applies step ``n`` only when the session's last applied step
is ``n - 1``. When a connection drops mid-step the client cannot know whether the step ran: it
reconnects and sends the same ``n`` again, and gets the recorded answer of step ``n`` (or, had
it not run, the step runs now). So a step is never applied twice. A number further back than the
recorded window, or one that skips ahead, is :class:`SequenceError` (409, naming the expected
number). A call without a number (the control plane's proxied routes, a reset) takes the next one.

The record is per session and in memory (the session's env state is too). A reset starts no new
numbering: numbers count every step of the session's life.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rockroll.sandbox.errors import SandboxError

__all__ = ["SequenceError", "StepLog", "REPLAY_WINDOW"]

REPLAY_WINDOW = 8
"""How many latest answers a session keeps for replays (a client retries its last step only)."""


class SequenceError(SandboxError, ValueError):
    """A step number that is neither the next one nor a recorded one (the data plane's 409)."""

    code = "bad_sequence"

    def __init__(self, session_id: str, got: int, expected: int) -> None:
        if got > expected:
            why = f"skips ahead (steps {expected}..{got - 1} were never sent)"
        else:
            why = f"is older than the last {REPLAY_WINDOW} recorded steps"
        super().__init__(f"step number {got} of session {session_id!r} {why}; the next step is number {expected}")
        self.session_id = session_id
        self.got = got
        self.expected = expected


class StepLog:
    """The numbering and the recent answers of one session (thread-safe; one step at a time)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.last = 0
        self._answers: OrderedDict[int, Any] = OrderedDict()
        self.lock = threading.Lock()  # held while a step runs: a replay waits for the answer it replays

    def check(self, seq: int | None) -> tuple[int, Any]:
        """Call under :attr:`lock`: ``(seq, recorded answer or None)``; raise :class:`SequenceError`."""
        if seq is None:
            return self.last + 1, None
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise SequenceError(self.session_id, -1, self.last + 1)
        if seq == self.last + 1:
            return seq, None
        if seq in self._answers:
            return seq, self._answers[seq]
        raise SequenceError(self.session_id, seq, self.last + 1)

    def record(self, seq: int, answer: Any) -> None:
        """Call under :attr:`lock`: step ``seq`` was applied with ``answer`` (errors are answers too)."""
        self.last = seq
        self._answers[seq] = answer
        while len(self._answers) > REPLAY_WINDOW:
            self._answers.popitem(last=False)

    def run(self, seq: int | None, step: Callable[[], Any]) -> tuple[Any, bool]:
        """Apply ``step`` as number ``seq`` (or replay it): ``(answer, replayed)``.

        A step that raises is recorded as applied with its error (the env may have moved) and the
        error raised again, so a replay of it raises the same error without stepping.
        """
        with self.lock:
            n, recorded = self.check(seq)
            if recorded is not None:
                if isinstance(recorded, BaseException):
                    raise recorded
                return recorded, True
            try:
                answer = step()
            except Exception as e:
                self.record(n, e)
                raise
            self.record(n, answer)
            return answer, False
